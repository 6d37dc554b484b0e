/** @jsxImportSource hono/jsx */
// The tokens and machines page and revoking a token (listing and revoking tokens are an admin's).

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import type { Api } from "./api";
import { act, findListed, isAdmin, page, read, tokenParam, type Json } from "./route-kit";
import { DASH } from "./session";
import { TokensPage } from "./tokens-page";

/** The tokens pages and revoking a token. */
export function tokensRoutes(dash: Hono<AppEnv>, api: Api): void {
  const runnersOf = async (c: Context<AppEnv>) => (await read(c, api, `/v1/runners?limit=${c.get("config").dashboardRowsMax}`)).runners as Json[];
  const window = (c: Context<AppEnv>) => c.get("config").runnerConnectedWindowMs;
  // Listing tokens needs the admin role: a member is told so, not shown the API's refusal.
  dash.get("/tokens", page(async (c) => {
    const tokens = isAdmin(c) ? ((await read(c, api, `/v1/tokens?limit=${c.get("config").dashboardRowsMax}`)).tokens as Json[]) : null;
    return c.html(<TokensPage tokens={tokens} runners={await runnersOf(c)} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
  dash.get("/tokens/:id", page(async (c) => {
    const token = await findListed(c, api, `/v1/tokens?limit=${c.get("config").dashboardRowsMax}`, "tokens", tokenParam(c));
    return c.html(<TokensPage title={`Token ${token.name ?? token.id}`} tokens={[token]} runners={[]} nowMs={Date.now()} connectedWindowMs={window(c)} admin={isAdmin(c)} />);
  }));
  dash.post("/tokens/:id/revoke", page(async (c) => act(c, api, "DELETE", `/v1/tokens/${tokenParam(c)}`, undefined, `${DASH}/tokens`)));
}
