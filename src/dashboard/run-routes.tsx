/** @jsxImportSource hono/jsx */
// A run's page, its live events, and what an operator does to a run.

import type { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { apiResponse, type Api } from "./api";
import { attemptMarks } from "./attempt-timeline";
import { RunPage } from "./run-page";
import { act, doneNotice, isAdmin, noSuch, page, read, Refused, runParam, type Json } from "./route-kit";
import { DASH } from "./session";

/** A run's page, its event stream for the page's live view, and the run's actions. */
export function runRoutes(dash: Hono<AppEnv>, api: Api): void {
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
}
