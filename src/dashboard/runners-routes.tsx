/** @jsxImportSource hono/jsx */
// Runners, a runner's page, and the tokens and machines page, with their revoke actions.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import type { Api } from "./api";
import { act, findListed, isAdmin, machineParam, page, read, tokenParam, type Json } from "./route-kit";
import { RunnersPage, TokensPage } from "./runners-pages";
import { DASH } from "./session";

/** The runners and tokens pages, and deregistering a machine or revoking a token. */
export function runnersRoutes(dash: Hono<AppEnv>, api: Api): void {
  const runnersOf = async (c: Context<AppEnv>) => (await read(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`)).runners as Json[];
  const window = (c: Context<AppEnv>) => c.get("config").runnerConnectedWindowMs;
  dash.get("/runners", page(async (c) => c.html(<RunnersPage runners={await runnersOf(c)} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />)));
  dash.get("/runners/:id", page(async (c) => {
    const runner = await findListed(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`, "runners", machineParam(c));
    return c.html(<RunnersPage title={`Runner ${runner.name}`} runners={[runner]} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
  // Listing tokens needs the admin role: a member is told so, not shown the API's refusal.
  dash.get("/tokens", page(async (c) => {
    const tokens = isAdmin(c) ? ((await read(c, api, `/v1/tokens?limit=${c.get("config").dashboardRowsMax}`)).tokens as Json[]) : null;
    return c.html(<TokensPage tokens={tokens} runners={await runnersOf(c)} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
  dash.get("/tokens/:id", page(async (c) => {
    const token = await findListed(c, api, `/v1/tokens?limit=${c.get("config").dashboardRowsMax}`, "tokens", tokenParam(c));
    return c.html(<TokensPage title={`Token ${token.name ?? token.id}`} tokens={[token]} runners={[]} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));  dash.post("/runners/:id/revoke", page(async (c) => act(c, api, "DELETE", `/v1/runners/${machineParam(c)}`, undefined, `${DASH}/runners`)));
  dash.post("/tokens/:id/revoke", page(async (c) => act(c, api, "DELETE", `/v1/tokens/${tokenParam(c)}`, undefined, `${DASH}/tokens`)));
}
