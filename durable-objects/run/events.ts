// A run's events, read from its outbox: pages, the live stream (durable-objects/run-streams.ts),
// operator redelivery, and the retention of sent events (a read that starts before events pruned
// after the retention is refused, never silently shortened).

import { DocketError, errorResponse, isRefusal, refusal, type Refusal } from "../../src/errors";
import { logRun } from "../../src/lib/log";
import type { Outbox, StoredEvent } from "../outbox";
import { STREAM_ORG_HEADER, streamAfter } from "../../src/run/event-stream";
import { tooManyStreams, type RunStreams } from "../run-streams";
import type { RunCore } from "./core";
import { finishPending } from "./pending";

export async function readEvents(core: RunCore, orgId: string, afterSeq: number, limit: number): Promise<{ events: StoredEvent[]; terminal: boolean } | Refusal> {
  const run = core.owned(orgId, false);
  if (isRefusal(run)) return run;
  const pruned = prunedRefusal(core, afterSeq);
  if (pruned) return pruned;
  return { events: core.outbox.after(afterSeq, limit), terminal: run.endedAtMs !== null };
}

/**
 * A page of events newest first, before `beforeSeq` (null: from the newest), for a reader that
 * starts at the run's end and pages back (a run's dashboard page). A cursor with nothing kept before
 * it because those events were pruned is refused, as an oldest-first read from there would be.
 */
export async function readNewestEvents(core: RunCore, orgId: string, beforeSeq: number | null, limit: number): Promise<{ events: StoredEvent[]; terminal: boolean; prunedThroughSeq: number } | Refusal> {
  const run = core.owned(orgId, false);
  if (isRefusal(run)) return run;
  const events = core.outbox.before(beforeSeq, limit);
  const prunedThroughSeq = core.outbox.prunedThroughSeq();
  if (events.length === 0 && beforeSeq !== null && beforeSeq > 1) {
    const pruned = prunedRefusal(core, beforeSeq - 2);
    if (pruned) return pruned;
  }
  return { events, terminal: run.endedAtMs !== null, prunedThroughSeq };
}

/**
 * The live event stream (GET /v1/runs/:id/events/stream): server-sent events from the outbox,
 * resumable from any sequence number. The Worker has authorized the member; the organization it
 * names must own this run.
 */
export function openStream(core: RunCore, streams: RunStreams, request: Request): Response {
  const run = core.owned(request.headers.get(STREAM_ORG_HEADER) ?? "", false);
  if (isRefusal(run)) return errorResponse(new DocketError(run.error.code, run.error.message));
  const pruned = prunedRefusal(core, streamAfter(request));
  if (pruned) return errorResponse(new DocketError(pruned.error.code, pruned.error.message, { pruned_through_seq: pruned.error.pruned_through_seq }));
  const answer = streams.open(run.id, streamAfter(request), Date.now());
  return answer ?? tooManyStreams(core.config.streamsPerRunMax, core.config.streamRetryMs);
}

/**
 * Operator redelivery: publishes the events after `afterSeq` again, sent or not; the consumer
 * stores each (run, seq) once (../shared/spec/build-lifecycle.md, "Events and completion retry
 * independently": "Delivery retries send the same job/sequence pair").
 */
export async function redeliverEvents(core: RunCore, orgId: string, afterSeq: number): Promise<{ requeued: number; outbox: ReturnType<Outbox["status"]> } | Refusal> {
  const run = core.owned(orgId, false);
  if (isRefusal(run)) return run;
  const requeued = core.outbox.requeue(afterSeq, Date.now());
  logRun("outbox.requeued", { run: run.id, attempt: run.attempt, seq: afterSeq, count: requeued, reason: "operator redelivery" });
  await finishPending(core, { notify: false });
  return { requeued, outbox: core.outbox.status() };
}

/**
 * The cron tick's retention backstop (src/retention.ts): prunes a batch of this run's sent events
 * if they are due, and has the alarm carry on with the rest. Answers how many are still due.
 */
export async function pruneEvents(core: RunCore): Promise<{ left: number }> {
  const run = core.load();
  if (!run) return { left: 0 };
  const now = Date.now();
  core.outbox.prune(run, now);
  const dueAt = core.outbox.pruneDueAtMs(run);
  if (dueAt === null || dueAt > now) return { left: 0 };
  const alarm = await core.ctx.storage.getAlarm();
  if (alarm === null || alarm > now) await core.ctx.storage.setAlarm(now);
  return { left: 1 };
}

/** A read that starts before events pruned after the retention is refused, never silently shortened. */
function prunedRefusal(core: RunCore, afterSeq: number): Refusal | null {
  const through = core.outbox.prunedThroughSeq();
  if (afterSeq >= through) return null;
  return refusal("events_pruned", `events up to ${through} were deleted after the retention period; read again from sequence number ${through} (an events page's cursor, the stream's after)`, {
    pruned_through_seq: through,
  });
}
