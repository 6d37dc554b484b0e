/** @jsxImportSource hono/jsx */
// The tokens and machines page, a token's page, and minting, renaming and revoking tokens (an
// admin's, each one call to /v1/tokens: docs/protocol.md, "Organizations and tokens").

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import { apiCall, type Api } from "./api";
import { act, doneNotice, isAdmin, optionalNumber, page, read, Refused, requireConfirmation, tokenParam, type Form, type Json } from "./route-kit";
import { DASH } from "./session";
import { EXPIRY_UNITS } from "./tokens-forms";
import { MintedTokenPage, TokenPage, TokensPage } from "./tokens-page";

/** The expiry typed as a number and a unit, in milliseconds; left out when empty; as typed when not a number, so the API names it. */
function expiresInMs(form: Form): unknown {
  const amount = optionalNumber(form.expires_in);
  if (amount === undefined) return undefined;
  const unit = typeof form.expires_unit === "string" ? EXPIRY_UNITS[form.expires_unit] : undefined;
  if (!unit) throw new Refused(400, { code: "invalid_request", field: "expires_unit", message: `The expiry's unit is one of ${Object.keys(EXPIRY_UNITS).join(", ")}.` });
  return typeof amount === "number" ? amount * unit : amount;
}

/** A mint form as POST /v1/tokens's body: a role for a member token, a use limit for a registration token, empty fields left out. */
function mintBody(form: Form): Json {
  const name = typeof form.name === "string" ? form.name.trim() : "";
  const member = form.kind === "member";
  return {
    kind: form.kind,
    name: name === "" ? undefined : name,
    role: member && form.role !== "" ? form.role : undefined,
    expires_in_ms: expiresInMs(form),
    max_uses: member ? undefined : optionalNumber(form.max_uses),
  };
}

/** The new token's page: its secret shown this once, kept from every cache (it is in no URL). */
async function mint(c: Context<AppEnv>, api: Api): Promise<Response> {
  const answer = await apiCall(c, api, "POST", "/v1/tokens", mintBody(await c.req.parseBody()));
  if (!answer.ok) throw new Refused(answer.status, answer.body.error ?? {});
  c.header("Cache-Control", "no-store");
  return c.html(<MintedTokenPage token={answer.body} origin={new URL(c.req.url).origin} admin={isAdmin(c)} />);
}

/** The tokens pages, and minting, renaming and revoking a token. */
export function tokensRoutes(dash: Hono<AppEnv>, api: Api): void {
  const rows = (c: Context<AppEnv>) => c.get("config").dashboardRowsMax;
  const runnersOf = async (c: Context<AppEnv>) => (await read(c, api, `/v1/runners?limit=${rows(c)}`)).runners as Json[];
  // Listing tokens needs the admin role: a member is told so, not shown the API's refusal.
  dash.get("/tokens", page(async (c) => {
    const tokens = isAdmin(c) ? ((await read(c, api, `/v1/tokens?limit=${rows(c)}`)).tokens as Json[]) : null;
    const config = c.get("config");
    return c.html(
      <TokensPage tokens={tokens} runners={await runnersOf(c)} nowMs={Date.now()} connectedWindowMs={config.runnerConnectedWindowMs} admin={isAdmin(c)} registrationTtlMs={config.registrationTokenTtlMs} notice={doneNotice(c)} />,
    );
  }));
  dash.post("/tokens", page(async (c) => mint(c, api)));
  dash.get("/tokens/:id", page(async (c) => {
    const token = await read(c, api, `/v1/tokens/${tokenParam(c)}`);
    return c.html(<TokenPage token={token} admin={isAdmin(c)} notice={doneNotice(c)} />);
  }));
  dash.post("/tokens/:id/rename", page(async (c) => {
    const id = tokenParam(c);
    const form = await c.req.parseBody();
    return act(c, api, "PATCH", `/v1/tokens/${id}`, { name: form.name }, `${DASH}/tokens/${id}?done=token+renamed`);
  }));
  dash.post("/tokens/:id/revoke", page(async (c) => {
    const id = tokenParam(c);
    requireConfirmation(await c.req.parseBody(), "revoking refuses every call with the token from then on");
    return act(c, api, "DELETE", `/v1/tokens/${id}`, undefined, `${DASH}/tokens?done=token+${id}+revoked`);
  }));
}
