// The member API for runs: dispatch with an Idempotency-Key, list, read, cancel, events.

import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { callbackView, readDelivery } from "../callbacks/deliveries";
import { unwrap } from "../errors";
import { type Config } from "../config";
import { checkDispatch } from "../bounds";
import { bookmarkHeader, idempotencyKeyHeader } from "../openapi/headers";
import { operation } from "../openapi/operation";
import { CancelRunBody, PauseRunBody, ResumeRunBody, CreateRunBody, ListRunEventsQuery, ListRunsQuery, QueuePage, QueueQuery, Run, RunEventPage, RunPage, RunPath } from "../protocol/runs";
import { idempotencyKeyOf, validate } from "../validate";
import { runStub } from "../lib/stubs";
import type { RunView } from "../run/view";
import { dispatchRun } from "../run/dispatch";
import { pageSize } from "../lib/pagination";
import { d1Session } from "../lib/read-session";
import { queueInOrder, whyWaiting } from "../run/waiting";
import { listRuns, runSummary } from "../run/run-list";

/**
 * The run as every run answer shows it: with its completion callback's receipt, which lives in D1
 * apart from the run (docs/callbacks.md), read through `db` (the request's D1 session), and why it
 * waits when it is queued (src/run/waiting.ts).
 */
async function runAnswer(env: AppEnv["Bindings"], db: D1Database, run: RunView, config: Config): Promise<Run> {
  const waitingRun = { id: run.id, orgId: run.org_id, state: run.state, hold: run.hold, labels: run.labels, protocol: run.launch.protocol, notBeforeMs: run.not_before_ms, projectId: run.project_id };
  const waiting = await whyWaiting(env, config, waitingRun, Date.now());
  return { ...run, callback: callbackView(run.callback_url, await readDelivery(db, run.id), config), waiting };
}

export const runRoutes = new Hono<AppEnv>()
  .post(
    "/runs",
    operation({
      id: "createRun",
      summary: "Dispatch a run",
      description: "Queues a run for a runner whose labels and protocols cover it. With an Idempotency-Key, a retry replays the run instead of making another.",
      tag: "Runs",
      auth: "member",
      responses: {
        201: { description: "The run, new.", schema: Run },
        200: { description: "The run the same Idempotency-Key and payload made before, as it is now.", schema: Run },
      },
      errors: ["idempotency_conflict"],
      headers: [idempotencyKeyHeader("a run's key holds for IDEMPOTENCY_KEY_TTL_MS (24 hours) from its first use, then creates a new run."), bookmarkHeader()],
    }),
    d1Session,
    validate("json", CreateRunBody, checkDispatch), async (c) => {
    const key = idempotencyKeyOf(c.req);
    const { run, replayed } = await dispatchRun(c.env, c.get("caller").orgId, c.req.valid("json"), key);
    return c.json(await runAnswer(c.env, c.get("db"), run, c.get("config")), replayed ? 200 : 201);
  })
  .get(
    "/runs",
    operation({
      id: "listRuns",
      summary: "List the organization's runs",
      description:
        "Newest first, filtered by state, autopilot project, a required label and a machine that claimed one of its attempts (all that are given). " +
        "A listed run is its queue row; GET /v1/runs/{id} has the whole run.",
      tag: "Runs",
      auth: "member",
      responses: { 200: { description: "A page of runs.", schema: RunPage } },
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("query", ListRunsQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const { kept, next } = await listRuns(c.get("db"), c.get("caller").orgId, q, q.cursor, limit);
    return c.json({ runs: kept.map(runSummary), next_cursor: next });
  })
  .get(
    "/runs/:id",
    operation({
      id: "getRun",
      summary: "Read a run",
      tag: "Runs",
      auth: "member",
      responses: { 200: { description: "The run.", schema: Run } },
      errors: ["not_found"],
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("param", RunPath), async (c) => {
    const { id } = c.req.valid("param");
    // The run itself comes from its run object (authoritative); only its callback receipt is D1's.
    const run = unwrap(await runStub(c.env, id).read(c.get("caller").orgId));
    return c.json(await runAnswer(c.env, c.get("db"), run, c.get("config")));
  })
  .get(
    "/queue",
    operation({
      id: "listQueue",
      summary: "The organization's queue in dispatch order, with why each run waits",
      description: "Queued runs in the order claims take them (continuations first, then priority, then age), each with `waiting` as GET /v1/runs/{id} gives it.",
      tag: "Runs",
      auth: "member",
      responses: { 200: { description: "The head of the queue.", schema: QueuePage } },
    }),
    validate("query", QueueQuery), async (c) => {
    const config = c.get("config");
    const limit = pageSize(c.req.valid("query").limit, 50, config.pageSizeMax);
    const { runs: queued, more } = await queueInOrder(c.env, config, c.get("caller").orgId, limit, Date.now());
    return c.json({ runs: queued, truncated: more });
  })
  .post(
    "/runs/:id/cancel",
    operation({
      id: "cancelRun",
      summary: "Cancel a run",
      description:
        "A queued, paused or blocked run is cancelled at once (200). A claimed or executing run records a stop request (202): " +
        "the runner stops it at its next lease refresh, or the reaper ends it once the lease is gone. Cancelling a cancelled run answers it unchanged.",
      tag: "Runs",
      auth: "member",
      responses: {
        200: { description: "The run, cancelled (or already cancelled).", schema: Run },
        202: { description: "The run with its stop request recorded.", schema: Run },
      },
      errors: ["not_found", "task_gone", "invalid_transition"],
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("param", RunPath),
    validate("json", CancelRunBody), async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const result = unwrap(await runStub(c.env, id).cancel(caller.orgId, `member:${caller.tokenId}`, c.req.valid("json").reason ?? null));
    return c.json(await runAnswer(c.env, c.get("db"), result.run, c.get("config")), result.immediate ? 200 : 202);
  })
  .post(
    "/runs/:id/pause",
    operation({
      id: "pauseRun",
      summary: "Stop at checkpoint: pause a run and hold it",
      description:
        "Sets the run's operator hold, which only POST /v1/runs/{id}/resume clears. A queued run is paused at once; an implementing run " +
        "becomes pausing and its runner asks the agent to checkpoint: it is paused once the checkpoint is stored. A pausing or paused run gets the hold. " +
        "Any other state is 409 invalid_transition naming it.",
      tag: "Runs",
      auth: "member",
      responses: { 200: { description: "The run, paused or pausing, with its hold.", schema: Run } },
      errors: ["not_found", "invalid_transition"],
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("param", RunPath),
    validate("json", PauseRunBody), async (c) => {
    const { id } = c.req.valid("param");
    const reason = c.req.valid("json").reason ?? null;
    const run = unwrap(await runStub(c.env, id).control(c.get("caller").orgId, { type: "pause", hold: true, reason }));
    return c.json(await runAnswer(c.env, c.get("db"), run, c.get("config")));
  })
  .post(
    "/runs/:id/resume",
    operation({
      id: "resumeRun",
      summary: "Resume paused run: clear the hold and queue the continuation",
      description:
        "A paused run goes back to the queue with its continuation target and checkpoint, subject to the ordinary checks of a claim. " +
        "A run that executed without a stored checkpoint is 409 checkpoint_missing (its recovery_problem says why); any state but paused is 409 invalid_transition.",
      tag: "Runs",
      auth: "member",
      responses: { 200: { description: "The run, queued again.", schema: Run } },
      errors: ["not_found", "invalid_transition", "checkpoint_missing"],
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("param", RunPath),
    validate("json", ResumeRunBody), async (c) => {
    const { id } = c.req.valid("param");
    const run = unwrap(await runStub(c.env, id).control(c.get("caller").orgId, { type: "resume", by: "operator" }));
    return c.json(await runAnswer(c.env, c.get("db"), run, c.get("config")));
  })
  .get(
    "/runs/:id/events",
    operation({
      id: "listRunEvents",
      summary: "Page through a run's events",
      description:
        "Oldest first, after the sequence number `cursor` (default 0). While the run has not ended next_cursor is never null: poll again with it. " +
        "With order=newest: newest first, before the sequence number `cursor` (default: from the newest event); next_cursor is the page's oldest event, " +
        "null once the page reaches the first event kept. A cursor below events pruned after EVENT_RETENTION_MS is 410 events_pruned with pruned_through_seq.",
      tag: "Events",
      auth: "member",
      responses: { 200: { description: "A page of events.", schema: RunEventPage } },
      errors: ["not_found", "events_pruned"],
    }),
    validate("param", RunPath),
    validate("query", ListRunEventsQuery), async (c) => {
    const { id } = c.req.valid("param");
    const q = c.req.valid("query");
    const limit = q.limit ?? 100;
    const stub = runStub(c.env, id);
    const orgId = c.get("caller").orgId;
    if (q.order === "newest") {
      const result = unwrap(await stub.readNewestEvents(orgId, q.cursor === undefined ? null : Number(q.cursor), limit));
      const oldest = result.events[result.events.length - 1];
      // Earlier events are kept while the page's oldest is past the first one kept.
      const more = oldest !== undefined && oldest.seq > result.prunedThroughSeq + 1;
      return c.json({ events: result.events.map(eventAnswer), next_cursor: more ? String(oldest.seq) : null, terminal: result.terminal });
    }
    const after = Number(q.cursor ?? 0);
    const result = unwrap(await stub.readEvents(orgId, after, limit + 1));
    const events = result.events.slice(0, limit);
    const last = events[events.length - 1];
    // More may follow while the page is full or the run has not ended; an ended run's short page is the last.
    const more = result.events.length > limit || !result.terminal;
    return c.json({ events: events.map(eventAnswer), next_cursor: more ? String(last ? last.seq : after) : null, terminal: result.terminal });
  });

/** A stored event as an answer shows it: its data parsed. */
const eventAnswer = (e: { seq: number; type: string; at_ms: number; data: string }) => ({ ...e, data: JSON.parse(e.data) as Record<string, unknown> });

