/** @jsxImportSource hono/jsx */
// The "Managed runners" page and its forms (docs/managed-runners.md).

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import { managedPoolId } from "../protocol/managed";
import type { Api } from "./api";
import { ManagedRunnersPage } from "./managed-pages";
import { act, doneNotice, formNumber, isAdmin, optionalNumber, page, pathParam, read, requireConfirmation, type Form, type Json } from "./route-kit";
import { DASH } from "./session";

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


/** The "Managed runners" page and its forms, each one call to /v1/managed/pools (docs/managed-runners.md). */
export function managedRoutes(dash: Hono<AppEnv>, api: Api): void {
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
    requireConfirmation(await c.req.parseBody(), "stopping halts the pool's containers");
    return act(c, api, "POST", `/v1/managed/pools/${id}/stop`, {}, back("pool+stopped"));
  }));
  dash.post("/managed/pools/:id/delete", page(async (c) => {
    const id = poolParam(c);
    requireConfirmation(await c.req.parseBody(), "deleting halts the pool's containers");
    return act(c, api, "DELETE", `/v1/managed/pools/${id}`, undefined, back("pool+deleted"));
  }));
}

