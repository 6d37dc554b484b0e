/** @jsxImportSource hono/jsx */
// Runners, a runner's page, and deregistering a machine.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import type { Api } from "./api";
import { liveSettings } from "./live";
import { act, isAdmin, machineParam, page, read, requireConfirmation } from "./route-kit";
import { RunnerPage, RunnersPage } from "./runners-pages";
import { DASH } from "./session";

/** The runners pages and deregistering a machine. */
export function runnersRoutes(dash: Hono<AppEnv>, api: Api): void {
  const window = (c: Context<AppEnv>) => c.get("config").runnerConnectedWindowMs;
  dash.get("/runners", page(async (c) => {
    const { runners } = await read(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`);
    return c.html(<RunnersPage runners={runners} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} live={liveSettings(c)} />);
  }));
  dash.get("/runners/:id", page(async (c) => {
    const id = machineParam(c);
    const cursor = c.req.query("cursor") || undefined;
    const query = new URLSearchParams({ machine_id: id, limit: String(c.get("config").dashboardRowsMax), ...(cursor ? { cursor } : {}) });
    const [runner, list] = await Promise.all([read(c, api, `/v1/runners/${id}`), read(c, api, `/v1/runs?${query}`)]);
    const props = { runner, runs: list.runs, next: list.next_cursor, cursor, nowMs: Date.now(), connectedWindowMs: window(c), admin: isAdmin(c), live: liveSettings(c) };
    return c.html(<RunnerPage {...props} />);
  }));
  dash.post("/runners/:id/revoke", page(async (c) => {
    const id = machineParam(c);
    requireConfirmation(await c.req.parseBody(), `deregister the runner ${id}`);
    return act(c, api, "DELETE", `/v1/runners/${id}`, undefined, `${DASH}/runners`);
  }));
}
