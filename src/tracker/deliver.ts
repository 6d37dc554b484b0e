// Tracker deliveries (docs/protocol.md, "Tracker deliveries"): a run's transition emits
// `run.tracker_delivery` in its own transaction; this handler (an EVENT_EFFECTS entry) records the
// receipt and hands one message per delivery to the events queue, whose consumer makes one try per
// delivery of the message through the project's tracker provider. A failure is retried with
// TRACKER_DELIVERY_BACKOFF_* up to TRACKER_DELIVERY_MAX_ATTEMPTS tries, then kept as failed for an
// operator's retry. Nothing here touches the run: retrying a comment never reruns coding
// (../shared/spec/run-lifecycle.md, "Blocker and failure").

import type { Config } from "../config";
import type { Env, OutboxMessage } from "../env";
import { DocketError } from "../errors";
import { logRun } from "../lib/log";
import { admissionDeps } from "../autopilot/wiring";
import { parseTicketKey, type CommentReceipt } from "../autopilot/provider";
import { afterAttempt, isDuplicateDelivery, type DeliveryOutcome } from "../queue/delivery";
import { eventsQueue, type TrackerDeliveryMessage } from "../queue/messages";
import { runStub } from "../lib/stubs";
import { unwrap } from "../errors";
import { claimTry, markFailed, overdueTrackerDeliveries, readTrackerDelivery, recordRequest, recordTry, restartFailed, trackerRound, type TrackerDeliveryRow } from "./receipts";
import { TRACKER_DELIVERY_EVENT, type DeliveryKind, type DeliveryRequest } from "../run/ticket-requests";
import { deliveryMarker, isDeliveryKind } from "./requests";

/** The event handler: records the request once and starts its first try; a redelivered event sends nothing twice. */
export async function requestTrackerDelivery(env: Env, event: OutboxMessage): Promise<void> {
  if (event.type !== TRACKER_DELIVERY_EVENT) return;
  const request = parseRequest(event.data);
  const row = await recordRequest(env.DB, { runId: event.run_id, orgId: event.org_id, request, now: Date.now() });
  if (row.status !== "pending" || row.tries > 0) return;
  await sendTry(env, row, event.attempt);
  logRun("tracker_delivery.scheduled", { run: event.run_id, attempt: event.attempt, seq: event.seq, kind: request.kind, try: 0, reason: `asked for by the run` });
}

function parseRequest(data: Record<string, unknown>): DeliveryRequest {
  const bad = (field: string) => new Error(`not a tracker delivery: ${field} is missing or malformed`);
  if (!isDeliveryKind(data.kind)) throw bad("kind");
  if (typeof data.ticket_key !== "string" || !parseTicketKey(data.ticket_key)) throw bad("ticket_key");
  if (typeof data.project_id !== "string" || data.project_id === "") throw bad("project_id");
  const request: DeliveryRequest = { kind: data.kind, ticket_key: data.ticket_key, project_id: data.project_id };
  if (typeof data.body === "string") request.body = data.body;
  if (typeof data.pr_url === "string") request.pr_url = data.pr_url;
  if (Number.isSafeInteger(data.pr_number)) request.pr_number = data.pr_number as number;
  if (Number.isSafeInteger(data.attempt)) request.attempt = data.attempt as number;
  return request;
}

/** Sends the message of the delivery's next try; `fromTry` is the tries it has made (0 but for the sweep's message). */
async function sendTry(env: Env, row: TrackerDeliveryRow, attempt: number, fromTry = 0): Promise<void> {
  const message: TrackerDeliveryMessage = { kind: "tracker_delivery", run_id: row.runId, org_id: row.orgId, delivery: row.kind, attempt, ...(fromTry > 0 ? { from_try: fromTry } : {}) };
  await eventsQueue(env).send(message, { contentType: "json" });
}

/**
 * The cron's sweep of tracker deliveries whose queue message was lost (pending, next try overdue by
 * more than DELIVERY_STALE_MS): each gets a message for its next try, at most DELIVERY_SWEEP_MAX a
 * tick. A message that was only late makes no second try: the try count's compare-and-swap lets
 * one of the two messages make it, and the other is a duplicate. The final tracker transition is
 * enqueued durably (../shared/spec/run-lifecycle.md, "Completion and recovery"): a lost message
 * must not leave it pending with nothing to send it.
 */
export async function resendOverdueTrackerDeliveries(env: Env, config: Config, now: number): Promise<number> {
  const rows = await overdueTrackerDeliveries(env.DB, config, now);
  for (const row of rows) {
    const attempt = (JSON.parse(row.request) as DeliveryRequest).attempt ?? 0;
    await sendTry(env, row, attempt, row.tries);
    const overdueSinceMs = row.lastTryAtMs ?? row.createdAtMs;
    logRun("tracker_delivery.resent", { run: row.runId, attempt, kind: row.kind, try: row.tries, reason: `pending with no try since ${new Date(overdueSinceMs).toISOString()}: its queue message was lost` });
  }
  return rows.length;
}

/** An operator's retry of a failed delivery (POST /v1/runs/:id/deliveries/:kind/retry): a new round of tries. */
export async function retryTrackerDelivery(env: Env, orgId: string, runId: string, kind: DeliveryKind, by: string): Promise<TrackerDeliveryRow> {
  const run = unwrap(await runStub(env, runId).read(orgId));
  const row = await readTrackerDelivery(env.DB, runId, kind);
  if (!row || row.orgId !== orgId) throw new DocketError("not_found", `the run has no ${kind} delivery`);
  if (row.status !== "failed" || !(await restartFailed(env.DB, runId, kind))) {
    throw new DocketError("invalid_transition", `the ${kind} delivery is ${row.status}; only a failed delivery is retried`, { status: row.status });
  }
  const restarted = (await readTrackerDelivery(env.DB, runId, kind))!;
  await sendTry(env, restarted, run.attempt);
  logRun("tracker_delivery.retry", { run: runId, attempt: run.attempt, kind, by, try: 0, reason: "operator retry" });
  return restarted;
}

/**
 * One queue delivery of a try message. The try is claimed by a compare-and-swap on the row's try
 * count; a message that has been delivered no more times than the row has tries is a duplicate.
 */
export async function deliverToTracker(env: Env, config: Config, msg: TrackerDeliveryMessage, queueAttempts: number): Promise<DeliveryOutcome> {
  const base = { run: msg.run_id, attempt: msg.attempt, kind: msg.delivery, queue_try: queueAttempts };
  const row = await readTrackerDelivery(env.DB, msg.run_id, msg.delivery);
  const skip = skipReason(row, msg, queueAttempts);
  if (skip) {
    logRun("tracker_delivery.skipped", { ...base, try: row?.tries ?? 0, reason: skip });
    return { ack: true };
  }
  const current = row!;
  if (current.tries >= config.trackerDeliveryMaxAttempts) {
    await markFailed(env.DB, current.runId, current.kind, current.tries, current.lastError ?? "tries exhausted");
    return { ack: true };
  }
  const tries = await claimTry(env.DB, current.runId, current.kind, current.tries, Date.now());
  if (tries === null) return { ack: true };
  const result = await tryOnce(env, config, current);
  const next = afterAttempt(result, tries, trackerRound(config));
  await recordTry(env.DB, current.runId, current.kind, tries, { status: next.status, error: result.error, receipt: result.receipt, now: Date.now() });
  logRun("tracker_delivery.try", { ...base, try: tries, max_tries: config.trackerDeliveryMaxAttempts, outcome: next.status, reason: result.error ?? "delivered", retry_in_s: next.retryInS });
  return next.outcome;
}

function skipReason(row: TrackerDeliveryRow | null, msg: TrackerDeliveryMessage, queueAttempts: number): string | null {
  if (!row || row.orgId !== msg.org_id) return "no delivery recorded";
  if (row.status !== "pending") return `already ${row.status}`;
  if (isDuplicateDelivery(row.tries, msg.from_try, queueAttempts)) return "duplicate message: this try was already made";
  return null;
}

type TryResult = { ok: true; error: null; receipt: CommentReceipt | null } | { ok: false; error: string; receipt: null };

/** Performs the delivery once through the project's provider; every failure comes back as a value. */
async function tryOnce(env: Env, config: Config, row: TrackerDeliveryRow): Promise<TryResult> {
  try {
    const deps = admissionDeps(env);
    const project = await deps.readProject(env, row.projectId);
    if (!project) return { ok: false, error: `the autopilot project ${row.projectId} no longer exists`, receipt: null };
    const ref = parseTicketKey(row.ticketKey)!;
    const provider = deps.provider(project, project.secrets, config, env);
    const request = JSON.parse(row.request) as DeliveryRequest;
    if (row.kind === "review_label") {
      await provider.moveLabels(ref, { remove: [project.readyLabel], add: [project.reviewLabel] });
      return { ok: true, error: null, receipt: null };
    }
    // A tracker that links a pull request to the issue (Linear's attachment) does so by its URL, once however often it is asked.
    if (row.kind === "pr_comment" && request.pr_url && provider.linkPullRequest) {
      const receipt = await provider.linkPullRequest(ref, { url: request.pr_url, title: pullRequestTitle(row.runId, request) });
      return { ok: true, error: null, receipt };
    }
    // A comment carries its marker: a try after a crash that followed the post finds it instead of posting again.
    const marker = deliveryMarker(row.runId, row.kind, request.attempt);
    const found = mayHavePosted(row) ? await provider.findComment(ref, marker) : null;
    if (found) return { ok: true, error: null, receipt: found };
    const receipt = await provider.postComment(ref, `${commentBody(row.runId, row.kind, request)}\n\n${marker}`);
    return { ok: true, error: null, receipt };
  } catch (err) {
    return { ok: false, error: String(err).slice(0, 500), receipt: null };
  }
}

/**
 * Whether an earlier try of this request may have posted its comment. The first try of a request
 * (no try counted, none failed: an operator's retry keeps the last error) follows no post, so it
 * posts without reading the issue's comments: a request GitHub would count for nothing.
 */
function mayHavePosted(row: TrackerDeliveryRow): boolean {
  return row.tries > 0 || row.lastError !== null;
}

function pullRequestTitle(runId: string, request: DeliveryRequest): string {
  return `Pull request${request.pr_number ? ` #${request.pr_number}` : ""} of Docket run ${runId}`;
}

function commentBody(runId: string, kind: DeliveryKind, request: DeliveryRequest): string {
  if (request.body) return request.body;
  if (kind === "pr_comment") return `Docket run ${runId} opened a pull request for this issue: ${request.pr_url ?? "(no link recorded)"}`;
  return `Docket run ${runId}: ${kind}`;
}
