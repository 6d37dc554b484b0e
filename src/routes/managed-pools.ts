// Managed runner pools (docs/managed-runners.md): admins create, change, start, stop and delete an
// organization's pools of runner containers; members read them. The containers' runners then
// register, claim and report through the same runner protocol as any machine.

import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import type { Config } from "../config";
import { managedPools } from "../db/managed-schema";
import { DocketError } from "../errors";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import { listPage, pageSize } from "../lib/pagination";
import { isUniqueViolation } from "../lib/unique-violation";
import { changedPoolRow, insertPoolWithinLimit, loadPool, newPoolRow, poolAnswers, type PoolRow } from "../managed/pools";
import { requireManagedRunners } from "../managed/runner-binding";
import { haltPool } from "../managed/scaler";
import { operation } from "../openapi/operation";
import { CreateManagedPoolBody, ListManagedPoolsQuery, ManagedPool, ManagedPoolPage, ManagedPoolPath, UpdateManagedPoolBody } from "../protocol/managed";
import { validate } from "../validate";

const TAG = "Managed runners";

/** Writes a new pool within the organization's limit; a name it already uses is 409 managed_pool_exists. */
async function insertPool(db: D1Database, config: Config, row: PoolRow): Promise<void> {
  try {
    await insertPoolWithinLimit(db, config, row);
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    throw new DocketError("managed_pool_exists", `a managed pool of this organization is already named ${row.name}`, { field: "name", name: row.name });
  }
}

/** Writes the pool's changeable columns, only while it is still the organization's. */
async function savePool(db: D1Database, row: PoolRow): Promise<void> {
  const { id, orgId, createdBy: _createdBy, createdAtMs: _createdAtMs, scaledAtMs: _scaledAtMs, lastHalt: _lastHalt, ...columns } = row;
  await drizzle(db).update(managedPools).set(columns).where(and(eq(managedPools.orgId, orgId), eq(managedPools.id, id)));
}

/** The pool as answered now, its slots read with it. */
async function answerOf(db: D1Database, config: Config, pool: PoolRow): Promise<ManagedPool> {
  const [answer] = await poolAnswers(db, config, [pool], Date.now());
  return answer;
}

/** Stops the pool first, so the scaler starts nothing while its slots are halted, then halts them. */
async function stopPool(env: AppEnv["Bindings"], pool: PoolRow, why: string, nowMs: number): Promise<PoolRow> {
  const stopped: PoolRow = { ...pool, state: "stopped", updatedAtMs: nowMs };
  await savePool(env.DB, stopped);
  await haltPool(env, pool.id, why, nowMs);
  return stopped;
}

export const managedPoolRoutes = new Hono<AppEnv>()
  .post(
    "/managed/pools",
    operation({
      id: "createManagedPool",
      summary: "Create a managed runner pool",
      description:
        "Runner containers Docket starts and stops: between min_instances and max_instances, more while queued runs its labels cover find no idle runner, fewer after idle_ms without work. Created running unless `state` is `stopped`.",
      tag: TAG,
      auth: "admin",
      responses: { 201: { description: "The pool; its slots start at the next cron tick.", schema: ManagedPool } },
      errors: ["managed_pool_exists", "managed_pool_limit", "managed_runners_unavailable"],
    }),
    validate("json", CreateManagedPoolBody),
    async (c) => {
      requireManagedRunners(c.env);
      const caller = c.get("caller");
      const config = c.get("config");
      const row = newPoolRow(config, { id: newId("mpl"), orgId: caller.orgId, createdBy: caller.tokenId }, c.req.valid("json"), Date.now());
      await insertPool(c.env.DB, config, row);
      log("managed.pool_created", { reason: "an admin created it", org: caller.orgId, pool: row.id, name: row.name, by: caller.tokenId });
      return c.json(await answerOf(c.env.DB, config, row), 201);
    },
  )
  .get(
    "/managed/pools",
    operation({
      id: "listManagedPools",
      summary: "List the organization's managed runner pools",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "A page of pools with their slots, newest first.", schema: ManagedPoolPage } },
    }),
    validate("query", ListManagedPoolsQuery),
    async (c) => {
      const q = c.req.valid("query");
      const config = c.get("config");
      const limit = pageSize(q.limit, 50, config.pageSizeMax);
      const { kept, next } = await listPage(c.env.DB, managedPools, [eq(managedPools.orgId, c.get("caller").orgId)], q.cursor, limit, { at: "createdAtMs" });
      return c.json({ pools: await poolAnswers(c.env.DB, config, kept, Date.now()), next_cursor: next });
    },
  )
  .get(
    "/managed/pools/:id",
    operation({
      id: "getManagedPool",
      summary: "Read a managed runner pool, its slots and their machines",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The pool.", schema: ManagedPool } },
      errors: ["not_found"],
    }),
    validate("param", ManagedPoolPath),
    async (c) => c.json(await answerOf(c.env.DB, c.get("config"), await loadPool(c.env.DB, c.get("caller").orgId, c.req.valid("param").id))),
  )
  .patch(
    "/managed/pools/:id",
    operation({
      id: "updateManagedPool",
      summary: "Change a managed pool's labels, minimum, maximum or idle time",
      description: "Only the fields sent change; `idle_ms: null` goes back to MANAGED_POOL_IDLE_MS. New labels apply to the containers started from then on.",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The pool as changed.", schema: ManagedPool } },
      errors: ["not_found"],
    }),
    validate("param", ManagedPoolPath),
    validate("json", UpdateManagedPoolBody),
    async (c) => {
      const caller = c.get("caller");
      const body = c.req.valid("json");
      const pool = await loadPool(c.env.DB, caller.orgId, c.req.valid("param").id);
      const changed = changedPoolRow(c.get("config"), pool, body, Date.now());
      await savePool(c.env.DB, changed);
      log("managed.pool_changed", { reason: "an admin changed it", org: caller.orgId, pool: pool.id, fields: Object.keys(body), by: caller.tokenId });
      return c.json(await answerOf(c.env.DB, c.get("config"), changed));
    },
  )
  .post(
    "/managed/pools/:id/start",
    operation({
      id: "startManagedPool",
      summary: "Start a managed pool: it scales from the next cron tick",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The pool, running.", schema: ManagedPool } },
      errors: ["not_found", "managed_runners_unavailable"],
    }),
    validate("param", ManagedPoolPath),
    async (c) => {
      requireManagedRunners(c.env);
      const caller = c.get("caller");
      let pool = await loadPool(c.env.DB, caller.orgId, c.req.valid("param").id);
      if (pool.state !== "running") {
        pool = { ...pool, state: "running", updatedAtMs: Date.now() };
        await savePool(c.env.DB, pool);
        log("managed.pool_started", { reason: "an admin started it", org: caller.orgId, pool: pool.id, by: caller.tokenId });
      }
      return c.json(await answerOf(c.env.DB, c.get("config"), pool));
    },
  )
  .post(
    "/managed/pools/:id/stop",
    operation({
      id: "stopManagedPool",
      summary: "Stop a managed pool and every container it runs",
      description: "Each container is halted and its machine deregistered; a run it held is taken back when its lease lapses, as for any runner.",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The pool, stopped, with no slot.", schema: ManagedPool } },
      errors: ["not_found"],
    }),
    validate("param", ManagedPoolPath),
    async (c) => {
      const caller = c.get("caller");
      const pool = await loadPool(c.env.DB, caller.orgId, c.req.valid("param").id);
      const stopped = await stopPool(c.env, pool, "an admin stopped its pool", Date.now());
      log("managed.pool_stopped", { reason: "an admin stopped it", org: caller.orgId, pool: pool.id, by: caller.tokenId });
      return c.json(await answerOf(c.env.DB, c.get("config"), stopped));
    },
  )
  .delete(
    "/managed/pools/:id",
    operation({
      id: "deleteManagedPool",
      summary: "Delete a managed pool, halting every container it runs",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The pool as it was last, stopped and with no slot.", schema: ManagedPool } },
      errors: ["not_found"],
    }),
    validate("param", ManagedPoolPath),
    async (c) => {
      const caller = c.get("caller");
      const pool = await loadPool(c.env.DB, caller.orgId, c.req.valid("param").id);
      const stopped = await stopPool(c.env, pool, "an admin deleted its pool", Date.now());
      await drizzle(c.env.DB).delete(managedPools).where(and(eq(managedPools.orgId, caller.orgId), eq(managedPools.id, pool.id)));
      log("managed.pool_deleted", { reason: "an admin deleted it", org: caller.orgId, pool: pool.id, by: caller.tokenId });
      return c.json(await answerOf(c.env.DB, c.get("config"), stopped));
    },
  );
