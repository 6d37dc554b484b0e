/** @jsxImportSource hono/jsx */
// The autopilot's projects, a project (its scheduler and the commands an admin gives it, its
// tickets, blocked runs and publications, and retrying a failed tracker delivery), a ticket, and
// resolving a run reservation held for review.

import type { Context, Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { autopilotProjectId } from "../protocol/autopilot";
import { runId } from "../protocol/common";
import { TRACKER_DELIVERY_KINDS } from "../protocol/runs";
import { apiCall, type Api } from "./api";
import { AutopilotProjectsPage } from "./autopilot-pages";
import { AutopilotProjectPage } from "./autopilot-project-page";
import { AutopilotTicketPage } from "./autopilot-ticket-page";
import { act, doneNotice, isAdmin, issueNumber, noSuch, page, pathParam, read, requireConfirmation, resolution, type Json } from "./route-kit";
import { DASH } from "./session";

/**
 * Each scheduler command: what it asks to be confirmed (draining and disabling stop the project's
 * admission; null: nothing to confirm) and what the page says once it is done.
 */
const COMMANDS: Record<string, { warning: string | null; done: string }> = {
  enable: { warning: null, done: "scheduler+enabled" },
  drain: { warning: "draining stops admission and dequeue", done: "scheduler+draining" },
  disable: { warning: "disabling stops admission and dequeue and pauses the executing runs", done: "scheduler+disabled" },
};

const deliveryKind = z.enum(TRACKER_DELIVERY_KINDS);

/** The projects list, each with its scheduler (read side by side; one that cannot be read shows as unknown). */
async function projectsPage(c: Context<AppEnv>, api: Api): Promise<Response> {
  const projects = (await read(c, api, `/v1/autopilot/projects?limit=${c.get("config").dashboardRowsMax}`)).projects as Json[];
  const schedulers = new Map<string, Json>();
  await Promise.all(
    projects.map(async (p) => {
      const answer = await apiCall(c, api, "GET", `/v1/autopilot/projects/${p.id}/scheduler`);
      if (answer.ok) schedulers.set(p.id, answer.body);
    }),
  );
  return c.html(<AutopilotProjectsPage projects={projects} schedulers={schedulers} admin={isAdmin(c)} />);
}

/** The project's page: its answer, scheduler, tickets, blocked runs and latest runs, read side by side. */
async function projectPage(c: Context<AppEnv>, api: Api, id: string): Promise<Response> {
  const rows = c.get("config").dashboardRowsMax;
  const base = `/v1/autopilot/projects/${id}`;
  const [project, scheduler, tickets, blocked, runs] = await Promise.all([
    read(c, api, base),
    read(c, api, `${base}/scheduler`),
    read(c, api, `${base}/tickets?limit=${rows}`),
    read(c, api, `${base}/runs?state=blocked&limit=${rows}`),
    read(c, api, `${base}/runs?limit=${rows}`),
  ]);
  const data = { project, scheduler, tickets: tickets.tickets as Json[], blocked: blocked.runs as Json[], runs: runs.runs as Json[] };
  return c.html(<AutopilotProjectPage {...data} admin={isAdmin(c)} notice={doneNotice(c)} />);
}

/** The autopilot pages, the scheduler commands, a delivery's retry and the reservation resolution. */
export function autopilotRoutes(dash: Hono<AppEnv>, api: Api): void {
  const projectParam = (c: Context<AppEnv>) => pathParam(c, "id", autopilotProjectId, "autopilot project");
  dash.get("/autopilot", page((c) => projectsPage(c, api)));
  dash.get("/autopilot/:id", page((c) => projectPage(c, api, projectParam(c))));
  dash.get("/autopilot/:id/tickets/:number", page(async (c) => {
    const id = projectParam(c);
    const ticket = await read(c, api, `/v1/autopilot/projects/${id}/tickets/${pathParam(c, "number", issueNumber, "issue")}`);
    return c.html(<AutopilotTicketPage projectId={id} ticket={ticket} admin={isAdmin(c)} />);
  }));
  dash.post("/autopilot/:id/scheduler/:command", page(async (c) => {
    const id = projectParam(c);
    const command = c.req.param("command") ?? "";
    if (!Object.hasOwn(COMMANDS, command)) throw noSuch("scheduler command", command);
    const { warning, done } = COMMANDS[command];
    if (warning) requireConfirmation(await c.req.parseBody(), warning);
    return act(c, api, "POST", `/v1/autopilot/projects/${id}/scheduler/${command}`, {}, `${DASH}/autopilot/${id}?done=${done}`);
  }));
  dash.post("/autopilot/:id/runs/:run/deliveries/:kind/retry", page(async (c) => {
    const id = projectParam(c);
    const run = pathParam(c, "run", runId, "run");
    const kind = pathParam(c, "kind", deliveryKind, "tracker delivery");
    return act(c, api, "POST", `/v1/runs/${run}/deliveries/${kind}/retry`, {}, `${DASH}/autopilot/${id}?done=${kind.replace("_", "+")}+of+${run}+sent+again`);
  }));
  dash.post("/autopilot/projects/:id/reservations/:run/resolve", page(async (c) => {
    const project = pathParam(c, "id", autopilotProjectId);
    const run = pathParam(c, "run", runId);
    return act(c, api, "POST", `/v1/autopilot/projects/${project}/reservations/${run}/resolve`, await resolution(c), `${DASH}/credits?done=reservation+of+${run}+resolved`);
  }));
}
