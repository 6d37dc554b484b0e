// The member API for runs: dispatch with an Idempotency-Key, list, read, cancel, events.

import { and, desc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { callbackView, readDelivery } from "../callbacks/deliveries";
import { requireMember } from "../auth";
import { runs } from "../db/schema";
import { unwrap } from "../errors";
import { type Config } from "../config";
import { RUN_STATES } from "../run/states";
import { checkDispatch } from "../bounds";
import { BOUND_CEILINGS } from "../protocol/bounds";
import { atMostKeys, idempotencyKeyOf, validate } from "../validate";
import { labelList, runId } from "../protocol/common";
import { runStub } from "../lib/stubs";
import { dispatchRun } from "../run/dispatch";
import { afterCursor, keysetCursor, pageOf, pageQuery, pageSize, seqCursor } from "../lib/pagination";

export const dispatchBody = z
  .object({
    brief: z.string().min(1).max(BOUND_CEILINGS.briefMaxChars),
    repository: z
      .object({
        url: z.string().min(1).max(2_000),
        commit: z.string().regex(/^[0-9a-f]{7,64}$/, "must be a commit hash").nullable().optional(),
      })
      .strict()
      .nullable()
      .optional(),
    labels: labelList.optional(),
    priority: z.number().int().min(0).max(1_000).optional(),
    launch: z
      .object({
        protocol: z.string().min(1).max(32).optional(),
        command: z.array(z.string().min(1).max(4_000)).min(1).max(64),
        image: z.string().min(1).max(500).nullable().optional(),
        env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().max(10_000)).refine(atMostKeys(BOUND_CEILINGS.launchEnvMaxKeys), "too many keys").optional(),
      })
      .strict(),
    callback_url: z.url({ protocol: /^https?$/ }).max(2_000).nullable().optional(),
    metadata: z.record(z.string().min(1).max(64), z.string().max(1_000)).refine(atMostKeys(BOUND_CEILINGS.metadataMaxKeys), "too many keys").optional(),
  })
  .strict();

export type DispatchBody = z.infer<typeof dispatchBody>;

const listQuery = z
  .object({
    state: z.enum(RUN_STATES).optional(),
    ...pageQuery(keysetCursor("run_[0-9a-f]{24}")),
  })
  .strict();

const cancelBody = z.object({ reason: z.string().max(1_000).optional() }).strict();

// An events page's cursor is a sequence number, the same as the live stream's ?after= and Last-Event-ID.
const eventsQuery = z.object(pageQuery(seqCursor, 1_000)).strict();

const idParam = z.object({ id: runId });

/** The run as every run answer shows it: with its completion callback's receipt, which lives in D1 apart from the run (docs/callbacks.md). */
async function runAnswer<T extends { id: string; callback_url: string | null }>(env: AppEnv["Bindings"], run: T, config: Config) {
  return { ...run, callback: callbackView(run.callback_url, await readDelivery(env.DB, run.id), config) };
}

export const runRoutes = new Hono<AppEnv>()
  .post("/runs", requireMember, validate("json", dispatchBody, checkDispatch), async (c) => {
    const key = idempotencyKeyOf(c.req);
    const { run, replayed } = await dispatchRun(c.env, c.get("caller").orgId, c.req.valid("json"), key);
    return c.json(await runAnswer(c.env, run, c.get("config")), replayed ? 200 : 201);
  })
  .get("/runs", requireMember, validate("query", listQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const orgId = c.get("caller").orgId;
    const conditions = [eq(runs.orgId, orgId)];
    if (q.state) conditions.push(eq(runs.state, q.state));
    if (q.cursor) conditions.push(afterCursor(runs.createdAtMs, runs.id, q.cursor));
    const rows = await drizzle(c.env.DB)
      .select()
      .from(runs)
      .where(and(...conditions))
      .orderBy(desc(runs.createdAtMs), desc(runs.id))
      .limit(limit + 1);
    const { kept, next } = pageOf(rows, limit);
    return c.json({
      runs: kept.map((r) => ({
        id: r.id,
        state: r.state,
        attempt: r.attempt,
        version: r.version,
        priority: -r.orderPriority,
        labels_key: r.labelsKey,
        not_before_ms: r.notBeforeMs,
        created_at_ms: r.createdAtMs,
        updated_at_ms: r.updatedAtMs,
      })),
      next_cursor: next,
    });
  })
  .get("/runs/:id", requireMember, validate("param", idParam), async (c) => {
    const { id } = c.req.valid("param");
    const run = unwrap(await runStub(c.env, id).read(c.get("caller").orgId));
    return c.json(await runAnswer(c.env, run, c.get("config")));
  })
  .post("/runs/:id/cancel", requireMember, validate("param", idParam), validate("json", cancelBody), async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const result = unwrap(await runStub(c.env, id).cancel(caller.orgId, `member:${caller.tokenId}`, c.req.valid("json").reason ?? null));
    return c.json(await runAnswer(c.env, result.run, c.get("config")), result.immediate ? 200 : 202);
  })
  .get("/runs/:id/events", requireMember, validate("param", idParam), validate("query", eventsQuery), async (c) => {
    const { id } = c.req.valid("param");
    const q = c.req.valid("query");
    const after = Number(q.cursor ?? 0);
    const limit = q.limit ?? 100;
    const result = unwrap(await runStub(c.env, id).readEvents(c.get("caller").orgId, after, limit + 1));
    const events = result.events.slice(0, limit);
    const last = events[events.length - 1];
    // More may follow while the page is full or the run has not ended; an ended run's short page is the last.
    const more = result.events.length > limit || !result.terminal;
    return c.json({
      events: events.map((e) => ({ ...e, data: JSON.parse(e.data) })),
      next_cursor: more ? String(last ? last.seq : after) : null,
      terminal: result.terminal,
    });
  });

