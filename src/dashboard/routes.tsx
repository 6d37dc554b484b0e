/** @jsxImportSource hono/jsx */
// The operator's dashboard at /dash: server-rendered pages over the API's own answers. Every read
// and every action (cancel, redeliver, revoke, deregister, resolve held credit) is a call to the
// API as the member token the session acts as (src/dashboard/api.ts), so the pages see exactly what
// that member's token may see.

import { Hono, type Context } from "hono";
import { z } from "zod";
import { csrf } from "hono/csrf";
import { HTTPException } from "hono/http-exception";
import { secureHeaders } from "hono/secure-headers";
import type { AppEnv } from "../app-types";
import { DocketError } from "../errors";
import { openReservations } from "../autopilot/run-reservations";
import { HELD_JOB_STATUSES, REVIEW_JOB_STATUSES } from "../builds/states";
import { autopilotProjectId } from "../protocol/autopilot";
import { managedPoolId } from "../protocol/managed";
import { buildJobId } from "../protocol/builds";
import { machineId, runId, tokenId } from "../protocol/common";
import { hourlyActivity } from "./activity";
import { apiCall, apiResponse, type Api } from "./api";
import { DASH_SCRIPTS } from "./assets";
import { AutopilotProjectPage, AutopilotProjectsPage, AutopilotTicketPage } from "./autopilot-pages";
import { attemptMarks } from "./charts";
import { ManagedRunnersPage } from "./managed-pages";
import { CreditsPage, ErrorPage, QueuePage, RunnersPage, RunPage, RunsPage, SignInPage, TokensPage } from "./pages";
import { DASH, endSession, requireSession, SESSION_ENDED, startSession, verifyMember } from "./session";

type Json = Record<string, any>;

/** An API refusal met while building a page: the page answers with its status and error. */
class Refused extends Error {
  constructor(readonly status: number, readonly error: Json) {
    super(String(error?.message ?? status));
  }
}

/** A page of something that does not exist (or that this member may not see): 404, in words. */
function noSuch(what: string, value: string): Refused {
  return new Refused(404, { code: "not_found", message: `No such ${what}: ${value}.` });
}

/**
 * A path parameter the API's own schema accepts; anything else is a page that does not exist. Ids
 * go into API paths, so only an id's own characters are let through.
 */
function pathParam(c: Context<AppEnv>, name: string, schema: z.ZodType<string>, what = "id"): string {
  const value = c.req.param(name) ?? "";
  if (!schema.safeParse(value).success) throw noSuch(what, value);
  return value;
}

const runParam = (c: Context<AppEnv>) => pathParam(c, "id", runId, "run");
const machineParam = (c: Context<AppEnv>) => pathParam(c, "id", machineId, "runner");
const tokenParam = (c: Context<AppEnv>) => pathParam(c, "id", tokenId, "token");
/** An issue number as a path segment (the API bounds its value). */
const issueNumber = z.string().regex(/^[1-9][0-9]{0,9}$/);

/** Whether the signed-in member has the admin role: admin-only actions are offered to admins only (the API still checks). */
function isAdmin(c: Context<AppEnv>): boolean {
  return c.get("caller")?.role === "admin";
}

/** A form's number field for the API: a number when it is one, otherwise as typed, so the API's validation names what is wrong with it. */
function formNumber(value: unknown): unknown {
  const typed = typeof value === "string" ? value.trim() : value;
  return typeof typed === "string" && /^\d{1,15}$/.test(typed) ? Number(typed) : typed;
}

/** A resolution form's body for the API: its cost and note. */
async function resolution(c: Context<AppEnv>): Promise<{ cost_cents: unknown; note: unknown }> {
  const form = await c.req.parseBody();
  return { cost_cents: formNumber(form.cost_cents), note: typeof form.note === "string" ? form.note : undefined };
}

async function read(c: Context<AppEnv>, api: Api, path: string): Promise<Json> {
  const answer = await apiCall(c, api, "GET", path);
  if (!answer.ok) throw new Refused(answer.status, answer.body.error ?? {});
  return answer.body;
}

/** What an action that came back here (`?done=`) did, for the page's status line. */
function doneNotice(c: Context<AppEnv>): string | undefined {
  const done = c.req.query("done");
  return done ? `Done: ${done}.` : undefined;
}

/** A page handler whose API refusals become error pages. */
function page(handler: (c: Context<AppEnv>) => Promise<Response>) {
  return async (c: Context<AppEnv>) => {
    try {
      return await handler(c);
    } catch (err) {
      if (!(err instanceof Refused)) throw err;
      return c.html(<ErrorPage status={err.status} error={err.error} admin={isAdmin(c)} />, err.status as 400);
    }
  };
}

/** An action: one API call, then back to `next` on success, or the refusal as an error page. */
async function act(c: Context<AppEnv>, api: Api, method: string, path: string, body: unknown, next: string): Promise<Response> {
  const answer = await apiCall(c, api, method, path, body);
  if (!answer.ok) throw new Refused(answer.status, answer.body.error ?? {});
  return c.redirect(next, 303);
}

/** Forms are accepted only from this origin (hono/csrf checks Origin and Sec-Fetch-Site); a cross-site post is 403. */
const sameOriginForms = (() => {
  const check = csrf();
  return async (c: Context<AppEnv>, next: () => Promise<void>) => {
    try {
      await check(c, next);
    } catch (err) {
      if (!(err instanceof HTTPException) || err.status !== 403) throw err;
      return c.html(<ErrorPage status={403} error={new DocketError("forbidden", "this form was not sent from the dashboard's own pages").toBody()} />, 403);
    }
  };
})();

const DASH_HEADERS = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'self'"],
    // The layout's empty inline icon (data:,), so no page asks for /favicon.ico.
    imgSrc: ["'self'", "data:"],
    styleSrc: ["'unsafe-inline'"],
    // Scripts are files of this origin (src/dashboard/assets.ts): an injected inline script does not run.
    scriptSrc: ["'self'"],
    connectSrc: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
  referrerPolicy: "same-origin",
});

/**
 * Every build job whose reservation is still held, of every such status (src/builds/states.ts), most
 * recently created first: the jobs the balance's Held accounts for.
 */
async function heldBuildJobs(c: Context<AppEnv>, api: Api, limit: number): Promise<Json[]> {
  const pages = await Promise.all(HELD_JOB_STATUSES.map((status) => read(c, api, `/v1/build-jobs?status=${status}&limit=${limit}`)));
  return pages.flatMap((p) => p.jobs as Json[]).sort((a, b) => b.created_at_ms - a.created_at_ms);
}

async function findListed(c: Context<AppEnv>, api: Api, path: string, key: string, id: string): Promise<Json> {
  const listed = (await read(c, api, path))[key] as Json[];
  const item = listed.find((x) => x.id === id);
  if (!item) throw noSuch(key.slice(0, -1), id);
  return item;
}

/** Why the session ended, as `?ended=` says it, in words for the sign-in page. */
function endedMessage(ended: string | undefined): string | undefined {
  if (!ended) return undefined;
  return Object.hasOwn(SESSION_ENDED, ended) ? SESSION_ENDED[ended as keyof typeof SESSION_ENDED] : SESSION_ENDED.unknown;
}

function signInRoutes(dash: Hono<AppEnv>): void {
  dash.get("/sign-in", (c) => c.html(<SignInPage message={endedMessage(c.req.query("ended"))} />));
  dash.post("/sign-in", async (c) => {
    const form = await c.req.parseBody();
    const token = typeof form.token === "string" ? form.token.trim() : "";
    let member;
    try {
      member = await verifyMember(c, token);
    } catch (err) {
      if (!(err instanceof DocketError) || (err.code !== "unauthorized" && err.code !== "rate_limited")) throw err;
      return c.html(<SignInPage error={`That token does not sign in: ${err.message}`} />, err.status as 401);
    }
    await startSession(c, member);
    return c.redirect(DASH, 303);
  });
  dash.post("/sign-out", async (c) => {
    await endSession(c);
    return c.redirect(`${DASH}/sign-in`, 303);
  });
  // The pages' scripts, before the session check: they hold nothing of any member's.
  dash.get("/assets/:file", page(async (c) => {
    const file = c.req.param("file") ?? "";
    if (!Object.hasOwn(DASH_SCRIPTS, file)) throw noSuch("file", file);
    return c.body(DASH_SCRIPTS[file], 200, { "Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "no-cache" });
  }));
}

function readRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.get("/", page(async (c) => {
    const config = c.get("config");
    const [queue, recent, activity] = await Promise.all([
      read(c, api, `/v1/queue?limit=${config.dashboardRowsMax}`),
      read(c, api, "/v1/runs?limit=20"),
      hourlyActivity(c.env.DB, config, c.get("caller").orgId, Date.now()),
    ]);
    return c.html(<QueuePage queue={queue} recent={recent.runs} activity={activity} admin={isAdmin(c)} />);
  }));
  dash.get("/runs", page(async (c) => c.html(<RunsPage runs={(await read(c, api, `/v1/runs?limit=${c.get("config").dashboardRowsMax}`)).runs} admin={isAdmin(c)} />)));
  dash.get("/runs/:id", page(async (c) => {
    const id = runParam(c);
    const run = await read(c, api, `/v1/runs/${id}`).catch((err) => {
      throw err instanceof Refused && err.status === 404 ? noSuch("run", id) : err;
    });
    const events = (await read(c, api, `/v1/runs/${id}/events?limit=${c.get("config").dashboardRowsMax}`)).events as Json[];
    const marks = attemptMarks(run, events, c.get("config").leaseTtlMs);
    return c.html(<RunPage run={run} events={events} marks={marks} nowMs={Date.now()} admin={isAdmin(c)} notice={doneNotice(c)} />);
  }));
  // EventSource cannot send a bearer token: the dashboard passes the API's stream on, resumable as it is.
  dash.get("/runs/:id/events/stream", page(async (c) => {
    const id = runParam(c);
    const after = /^\d+$/.test(c.req.query("after") ?? "") ? c.req.query("after") : "0";
    const lastEventId = c.req.header("Last-Event-ID");
    const res = await apiResponse(c, api, "GET", `/v1/runs/${id}/events/stream?after=${after}`, undefined, lastEventId ? { "Last-Event-ID": lastEventId } : {});
    // A copy, so this app's middleware may add its headers to an answer whose own are immutable.
    return new Response(res.body, res);
  }));
  const runnersOf = async (c: Context<AppEnv>) => (await read(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`)).runners as Json[];
  const window = (c: Context<AppEnv>) => c.get("config").runnerConnectedWindowMs;
  dash.get("/runners", page(async (c) => c.html(<RunnersPage runners={await runnersOf(c)} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />)));
  dash.get("/runners/:id", page(async (c) => {
    const runner = await findListed(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`, "runners", machineParam(c));
    return c.html(<RunnersPage title={`Runner ${runner.name}`} runners={[runner]} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
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
  dash.get("/credits", page(async (c) => {
    const limit = c.get("config").dashboardRowsMax;
    const [credits, heldJobs, paused, reservations] = await Promise.all([
      read(c, api, `/v1/credits?limit=${limit}`),
      heldBuildJobs(c, api, limit),
      read(c, api, `/v1/runs?state=paused&limit=${limit}`),
      openReservations(c.env.DB, c.get("caller").orgId, limit),
    ]);
    const review = heldJobs.filter((j) => REVIEW_JOB_STATUSES.includes(j.status));
    return c.html(<CreditsPage credits={credits} held={heldJobs} review={review} paused={paused.runs} reservations={reservations} admin={isAdmin(c)} notice={doneNotice(c)} />);
  }));
  // Listing tokens needs the admin role: a member is told so, not shown the API's refusal.
  dash.get("/tokens", page(async (c) => {
    const tokens = isAdmin(c) ? ((await read(c, api, `/v1/tokens?limit=${c.get("config").dashboardRowsMax}`)).tokens as Json[]) : null;
    return c.html(<TokensPage tokens={tokens} runners={await runnersOf(c)} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
  dash.get("/tokens/:id", page(async (c) => {
    const token = await findListed(c, api, `/v1/tokens?limit=${c.get("config").dashboardRowsMax}`, "tokens", tokenParam(c));
    return c.html(<TokensPage title={`Token ${token.name ?? token.id}`} tokens={[token]} runners={[]} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
}

function actionRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.post("/runs/:id/cancel", page(async (c) => {
    const id = runParam(c);
    const form = await c.req.parseBody();
    const reason = typeof form.reason === "string" && form.reason.trim() ? form.reason.trim() : undefined;
    return act(c, api, "POST", `/v1/runs/${id}/cancel`, reason ? { reason } : {}, `${DASH}/runs/${id}?done=cancel+requested`);
  }));
  dash.post("/runs/:id/redeliver", page(async (c) => {
    const id = runParam(c);
    return act(c, api, "POST", `/v1/runs/${id}/callback/redeliver`, {}, `${DASH}/runs/${id}?done=callback+sent+again`);
  }));
  // Resolutions of held credit, with the form's cost and note; the API validates both and checks the admin role.
  dash.post("/build-jobs/:id/resolve", page(async (c) => {
    const id = pathParam(c, "id", buildJobId);
    return act(c, api, "POST", `/v1/build-jobs/${encodeURIComponent(id)}/resolve`, await resolution(c), `${DASH}/credits?done=build+job+${encodeURIComponent(id)}+resolved`);
  }));
  dash.post("/autopilot/projects/:id/reservations/:run/resolve", page(async (c) => {
    const project = pathParam(c, "id", autopilotProjectId);
    const run = pathParam(c, "run", runId);
    return act(c, api, "POST", `/v1/autopilot/projects/${project}/reservations/${run}/resolve`, await resolution(c), `${DASH}/credits?done=reservation+of+${run}+resolved`);
  }));
  dash.post("/runners/:id/revoke", page(async (c) => act(c, api, "DELETE", `/v1/runners/${machineParam(c)}`, undefined, `${DASH}/runners`)));
  dash.post("/tokens/:id/revoke", page(async (c) => act(c, api, "DELETE", `/v1/tokens/${tokenParam(c)}`, undefined, `${DASH}/tokens`)));
}

type Form = Record<string, unknown>;

/** A form's optional number field: left out when empty. */
const optionalNumber = (value: unknown) => (value === undefined || value === "" ? undefined : formNumber(value));

/** The new pool form as the API's body; labels are typed separated by commas or spaces, the idle time in minutes. */
function newPoolBody(form: Form): Json {
  const labels = typeof form.labels === "string" ? form.labels.split(/[\s,]+/).filter(Boolean) : [];
  const idleMinutes = optionalNumber(form.idle_minutes);
  return {
    name: typeof form.name === "string" ? form.name.trim() : form.name,
    labels,
    min_instances: optionalNumber(form.min_instances),
    max_instances: formNumber(form.max_instances),
    idle_ms: typeof idleMinutes === "number" ? idleMinutes * 60_000 : idleMinutes,
  };
}

/** Stopping or deleting halts containers: the form says so and is sent with its box ticked. */
function requireConfirmation(form: Form, what: string): void {
  if (form.confirm !== "yes") throw new Refused(400, { code: "invalid_request", field: "confirm", message: `Tick the confirmation box: ${what} halts the pool's containers.` });
}

/** The "Managed runners" page and its forms, each one call to /v1/managed/pools (docs/managed-runners.md). */
function managedRoutes(dash: Hono<AppEnv>, api: Api): void {
  const poolParam = (c: Context<AppEnv>) => pathParam(c, "id", managedPoolId, "managed pool");
  const back = (done: string) => `${DASH}/managed?done=${done}`;
  dash.get("/managed", page(async (c) => {
    const pools = (await read(c, api, `/v1/managed/pools?limit=${c.get("config").dashboardRowsMax}`)).pools as Json[];
    return c.html(<ManagedRunnersPage pools={pools} admin={isAdmin(c)} notice={doneNotice(c)} />);
  }));
  dash.post("/managed/pools", page(async (c) => act(c, api, "POST", "/v1/managed/pools", newPoolBody(await c.req.parseBody()), back("pool+created"))));
  dash.post("/managed/pools/:id/update", page(async (c) => {
    const id = poolParam(c);
    const form = await c.req.parseBody();
    const body = { min_instances: optionalNumber(form.min_instances), max_instances: optionalNumber(form.max_instances) };
    return act(c, api, "PATCH", `/v1/managed/pools/${id}`, body, back("pool+changed"));
  }));
  dash.post("/managed/pools/:id/start", page(async (c) => act(c, api, "POST", `/v1/managed/pools/${poolParam(c)}/start`, {}, back("pool+started"))));
  dash.post("/managed/pools/:id/stop", page(async (c) => {
    const id = poolParam(c);
    requireConfirmation(await c.req.parseBody(), "stopping");
    return act(c, api, "POST", `/v1/managed/pools/${id}/stop`, {}, back("pool+stopped"));
  }));
  dash.post("/managed/pools/:id/delete", page(async (c) => {
    const id = poolParam(c);
    requireConfirmation(await c.req.parseBody(), "deleting");
    return act(c, api, "DELETE", `/v1/managed/pools/${id}`, undefined, back("pool+deleted"));
  }));
}

/** The dashboard, calling `api` (the Worker's app) for everything it shows and does. */
export function dashboardRoutes(api: Api): Hono<AppEnv> {
  const dash = new Hono<AppEnv>();
  dash.use("*", DASH_HEADERS);
  dash.use("*", sameOriginForms);
  signInRoutes(dash);
  dash.use("*", requireSession);
  readRoutes(dash, api);
  actionRoutes(dash, api);
  managedRoutes(dash, api);
  // Last: any other path under /dash is the dashboard's own 404 page, not the API's JSON.
  dash.all("*", page(async (c) => {
    throw noSuch("page", c.req.path);
  }));
  return dash;
}
