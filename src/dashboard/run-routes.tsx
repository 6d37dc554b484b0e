/** @jsxImportSource hono/jsx */
// A run's page, its live events, and what an operator does to a run: pause, resume, cancel (with
// its confirmation) and sending the completion callback again, each one call to the API.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import { apiResponse, type Api } from "./api";
import { attemptMarks } from "./attempt-timeline";
import { RunPage, type EventsPage } from "./run-page";
import { act, doneNotice, isAdmin, noSuch, page, read, Refused, requireConfirmation, runParam, type Form, type Json } from "./route-kit";
import { DASH } from "./session";

/**
 * A page of the run's events, newest first: the newest DASHBOARD_ROWS_MAX, or those before `?before=`
 * (an earlier page). The API checks the cursor: a malformed one is its 400, on the error page.
 */
async function eventsPage(c: Context<AppEnv>, api: Api, id: string): Promise<EventsPage> {
  const before = c.req.query("before") ?? null;
  const cursor = before === null ? "" : `&cursor=${encodeURIComponent(before)}`;
  const answer = await read(c, api, `/v1/runs/${id}/events?order=newest&limit=${c.get("config").dashboardRowsMax}${cursor}`);
  return { events: answer.events as Json[], nextCursor: answer.next_cursor, before };
}

/** The form's reason, when one was typed. */
async function reasonBody(c: Context<AppEnv>): Promise<{ form: Form; body: { reason?: string } }> {
  const form = await c.req.parseBody();
  const reason = typeof form.reason === "string" && form.reason.trim() ? form.reason.trim() : undefined;
  return { form, body: reason ? { reason } : {} };
}

/** A run's page, its event stream for the page's live view, and the run's actions. */
export function runRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.get("/runs/:id", page(async (c) => {
    const id = runParam(c);
    const run = await read(c, api, `/v1/runs/${id}`).catch((err) => {
      throw err instanceof Refused && err.status === 404 ? noSuch("run", id) : err;
    });
    const events = await eventsPage(c, api, id);
    const marks = attemptMarks(run, c.get("config").leaseTtlMs);
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
    const { form, body } = await reasonBody(c);
    requireConfirmation(form, "cancelling a run cannot be undone");
    return act(c, api, "POST", `/v1/runs/${id}/cancel`, body, `${DASH}/runs/${id}?done=cancel+requested`);
  }));
  dash.post("/runs/:id/pause", page(async (c) => {
    const id = runParam(c);
    return act(c, api, "POST", `/v1/runs/${id}/pause`, (await reasonBody(c)).body, `${DASH}/runs/${id}?done=pause+requested`);
  }));
  dash.post("/runs/:id/resume", page(async (c) => {
    const id = runParam(c);
    return act(c, api, "POST", `/v1/runs/${id}/resume`, {}, `${DASH}/runs/${id}?done=resumed`);
  }));
  dash.post("/runs/:id/redeliver", page(async (c) => {
    const id = runParam(c);
    return act(c, api, "POST", `/v1/runs/${id}/callback/redeliver`, {}, `${DASH}/runs/${id}?done=callback+sent+again`);
  }));
}
