/** @jsxImportSource hono/jsx */
// Runners, a runner's page, and deregistering a machine.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import type { Api } from "./api";
import { act, findListed, isAdmin, machineParam, page, read, type Json } from "./route-kit";
import { RunnersPage } from "./runners-pages";
import { DASH } from "./session";

/** The runners pages and deregistering a machine. */
export function runnersRoutes(dash: Hono<AppEnv>, api: Api): void {
  const runnersOf = async (c: Context<AppEnv>) => (await read(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`)).runners as Json[];
  const window = (c: Context<AppEnv>) => c.get("config").runnerConnectedWindowMs;
  dash.get("/runners", page(async (c) => c.html(<RunnersPage runners={await runnersOf(c)} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />)));
  dash.get("/runners/:id", page(async (c) => {
    const runner = await findListed(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`, "runners", machineParam(c));
    return c.html(<RunnersPage title={`Runner ${runner.name}`} runners={[runner]} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
  dash.post("/runners/:id/revoke", page(async (c) => act(c, api, "DELETE", `/v1/runners/${machineParam(c)}`, undefined, `${DASH}/runners`)));
}
