/** @jsxImportSource hono/jsx */
// The autopilot's projects, a project, its tickets, and resolving a run reservation held for review.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import { autopilotProjectId } from "../protocol/autopilot";
import { runId } from "../protocol/common";
import type { Api } from "./api";
import { AutopilotProjectPage, AutopilotProjectsPage, AutopilotTicketPage } from "./autopilot-pages";
import { act, isAdmin, issueNumber, page, pathParam, read, resolution, type Json } from "./route-kit";
import { DASH } from "./session";

/** The autopilot pages and the reservation resolution. */
export function autopilotRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.get("/autopilot", page(async (c) => {
    const projects = (await read(c, api, `/v1/autopilot/projects?limit=${c.get("config").dashboardRowsMax}`)).projects as Json[];
    return c.html(<AutopilotProjectsPage projects={projects} admin={isAdmin(c)} />);
  }));
  const projectParam = (c: Context<AppEnv>) => pathParam(c, "id", autopilotProjectId, "autopilot project");
  dash.get("/autopilot/:id", page(async (c) => {
    const id = projectParam(c);
    const [project, tickets] = await Promise.all([
      read(c, api, `/v1/autopilot/projects/${id}`),
      read(c, api, `/v1/autopilot/projects/${id}/tickets?limit=${c.get("config").dashboardRowsMax}`),
    ]);
    return c.html(<AutopilotProjectPage project={project} tickets={tickets.tickets as Json[]} admin={isAdmin(c)} />);
  }));
  dash.get("/autopilot/:id/tickets/:number", page(async (c) => {
    const id = projectParam(c);
    const ticket = await read(c, api, `/v1/autopilot/projects/${id}/tickets/${pathParam(c, "number", issueNumber, "issue")}`);
    return c.html(<AutopilotTicketPage projectId={id} ticket={ticket} admin={isAdmin(c)} />);
  }));
  dash.post("/autopilot/projects/:id/reservations/:run/resolve", page(async (c) => {
    const project = pathParam(c, "id", autopilotProjectId);
    const run = pathParam(c, "run", runId);
    return act(c, api, "POST", `/v1/autopilot/projects/${project}/reservations/${run}/resolve`, await resolution(c), `${DASH}/credits?done=reservation+of+${run}+resolved`);
  }));
}
