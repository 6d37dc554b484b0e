// One attempt of a completion callback: POST the run's final view, signed, to the URL given at
// dispatch. A failure is retried by the Queue with exponential backoff, independently of execution:
// nothing here touches the run, so a failed callback never changes its outcome
// (../shared/spec/build-lifecycle.md, "Events and completion retry independently": "Callback
// delivery does not rerun paid model work").

import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { orgs } from "../db/schema";
import type { Env } from "../env";
import { isRefusal } from "../errors";
import { logRun } from "../lib/log";
import { fetchOutbound, OutboundRefused, outboundPolicy } from "../lib/outbound-address";
import { afterAttempt, isDuplicateDelivery, type DeliveryOutcome } from "../queue/delivery";
import type { CallbackMessage } from "../queue/messages";
import { runStub } from "../lib/stubs";
import type { RunView } from "../run/view";
import { callbackRound, claimAttempt, markFailed, readDelivery, recordAttempt, type DeliveryRow } from "./deliveries";
import { signingSecrets } from "./secret";
import { SIGNATURE_HEADER, signatureHeader } from "./signature";

export const CALLBACK_EVENT = "run.ended";

/** The body a receiver gets: the same bytes on every attempt of a run's callback. */
export function completionPayload(run: RunView) {
  return { type: CALLBACK_EVENT, run_id: run.id, org_id: run.org_id, state: run.state, ended_at_ms: run.ended_at_ms, run };
}

/**
 * Handles one delivery of a callback message. Each queue delivery makes at most one attempt: the
 * attempt is claimed by a compare-and-swap on the row's attempt count, and a message whose attempts
 * are already behind the row (a duplicate) is dropped.
 */
export async function deliverCallback(
  env: Env,
  config: Config,
  msg: CallbackMessage & { attempt: number },
  queueAttempts: number,
): Promise<DeliveryOutcome> {
  // `try` is the callback's attempt number (its Docket-Attempt header); `queue_try` counts deliveries.
  const base = { run: msg.run_id, attempt: msg.attempt, org: msg.org_id, seq: msg.seq, queue_try: queueAttempts };
  const row = await readDelivery(env.DB, msg.run_id);
  if (!row || row.orgId !== msg.org_id) {
    logRun("callback.skipped", { ...base, reason: "no delivery recorded for this run" });
    return { ack: true };
  }
  if (row.status !== "pending") {
    logRun("callback.skipped", { ...base, try: row.attempts, reason: `already ${row.status}` });
    return { ack: true };
  }
  // Each queue delivery of a round's message is one attempt, so a message that has been delivered
  // no more times than the row has attempts is a duplicate of a message already at work.
  if (isDuplicateDelivery(row.attempts, msg.from_try, queueAttempts)) {
    logRun("callback.skipped", { ...base, try: row.attempts, reason: "duplicate message: this attempt was already made" });
    return { ack: true };
  }
  if (row.attempts >= config.callbackMaxAttempts) {
    await markFailed(env.DB, row.runId, row.attempts, row.lastError ?? "attempts exhausted");
    logRun("callback.attempt", { ...base, try: row.attempts, outcome: "failed", reason: "attempts exhausted" });
    return { ack: true };
  }
  const startedAtMs = Date.now();
  const attempt = await claimAttempt(env.DB, row.runId, row.attempts, startedAtMs);
  if (attempt === null) {
    logRun("callback.skipped", { ...base, try: row.attempts + 1, reason: "another delivery claimed this attempt" });
    return { ack: true };
  }
  const result = await attemptOnce(env, config, row, attempt);
  const next = afterAttempt(result, attempt, callbackRound(config));
  await recordAttempt(env.DB, row.runId, attempt, { status: next.status, error: result.error, statusCode: result.statusCode, now: Date.now() });
  logRun("callback.attempt", {
    ...base,
    try: attempt,
    max_tries: config.callbackMaxAttempts,
    outcome: next.status,
    status_code: result.statusCode,
    reason: result.ok ? `HTTP ${result.statusCode}` : (result.detail ?? result.error ?? "failed"),
    retry_in_s: next.retryInS,
    duration_ms: Date.now() - startedAtMs,
  });
  return next.outcome;
}

interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  /** What the run's reader sees (last_error): a status and a fixed description, never the receiver's words. */
  error: string | null;
  /** No later attempt can do better (a refused address): the delivery fails now. */
  final?: boolean;
  /** For the operator's log line only: what the runtime said about a failed request. */
  detail?: string;
}

/**
 * last_error for an answer that is not a 2xx. The answer's body is never read: the URL is the
 * tenant's, and what it answers must not become a way to read what Docket can reach.
 */
function answerError(status: number): string {
  if (status >= 300 && status < 400) return `HTTP ${status}: the receiver answered with a redirect, which Docket does not follow`;
  if (status >= 500) return `HTTP ${status}: the receiver failed`;
  return `HTTP ${status}: the receiver did not accept the callback`;
}

/** Sends the callback once; every failure, thrown or answered, comes back as a value. */
async function attemptOnce(env: Env, config: Config, row: DeliveryRow, attempt: number): Promise<AttemptResult> {
  try {
    const run = await runStub(env, row.runId).read(row.orgId);
    if (isRefusal(run)) return { ok: false, statusCode: null, error: `the run could not be read: ${run.error.code}` };
    const org = await drizzle(env.DB)
      .select({ callbackSecret: orgs.callbackSecret, previousCallbackSecret: orgs.previousCallbackSecret, callbackSecretRotatedAtMs: orgs.callbackSecretRotatedAtMs })
      .from(orgs)
      .where(eq(orgs.id, row.orgId))
      .get();
    if (!org) return { ok: false, statusCode: null, error: "the organization no longer exists" };
    const body = JSON.stringify(completionPayload(run));
    const now = Date.now();
    // The URL was checked at dispatch; it is checked again here, under today's policy, and a
    // redirect is never followed (it comes back as the answer).
    const init = {
      method: "POST",
      body,
      signal: AbortSignal.timeout(config.callbackTimeoutMs),
      headers: {
        "Content-Type": "application/json",
        "User-Agent": "Docket-Callbacks/1",
        "Docket-Event": CALLBACK_EVENT,
        "Docket-Run": row.runId,
        "Docket-Attempt": String(attempt),
        [SIGNATURE_HEADER]: await signatureHeader(signingSecrets(org, config.callbackSecretOverlapMs, now), body, now),
      },
    };
    const res = await fetchOutbound(outboundPolicy(config), row.url, init, { redirectsMax: 0 });
    await res.body?.cancel().catch(() => {});
    if (res.status >= 200 && res.status < 300) return { ok: true, statusCode: res.status, error: null };
    return { ok: false, statusCode: res.status, error: answerError(res.status) };
  } catch (err) {
    if (err instanceof OutboundRefused) {
      return { ok: false, statusCode: null, final: true, error: `not sent: ${err.reason} (this deployment sends no callbacks there)` };
    }
    const name = (err as Error)?.name;
    if (name === "TimeoutError") return { ok: false, statusCode: null, error: `no answer within ${config.callbackTimeoutMs} ms` };
    return { ok: false, statusCode: null, error: "the request failed before an answer (connection or network error)", detail: String(err).slice(0, 500) };
  }
}
