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
import { QUEUE_DELAY_MAX_S, type CallbackMessage } from "../queue/messages";
import { runStub } from "../lib/stubs";
import type { RunView } from "../run/view";
import { callbackBackoffMs, claimAttempt, markFailed, readDelivery, recordAttempt, type DeliveryRow } from "./deliveries";
import { signingSecrets } from "./secret";
import { SIGNATURE_HEADER, signatureHeader } from "./signature";

export const CALLBACK_EVENT = "run.ended";

/** What the consumer does with the callback message: acknowledge it, or have the Queue retry it. */
export type CallbackOutcome = { ack: true } | { ack: false; delaySeconds: number };

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
): Promise<CallbackOutcome> {
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
  if (row.attempts >= queueAttempts) {
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
  const status = result.ok ? "delivered" : attempt >= config.callbackMaxAttempts ? "failed" : "pending";
  await recordAttempt(env.DB, row.runId, attempt, { status, error: result.error, statusCode: result.statusCode, now: Date.now() });
  const delaySeconds = status === "pending" ? Math.min(QUEUE_DELAY_MAX_S, Math.ceil(callbackBackoffMs(config, attempt) / 1_000)) : null;
  logRun("callback.attempt", {
    ...base,
    try: attempt,
    max_tries: config.callbackMaxAttempts,
    outcome: status,
    status_code: result.statusCode,
    reason: result.ok ? `HTTP ${result.statusCode}` : (result.error ?? "failed"),
    retry_in_s: delaySeconds,
    duration_ms: Date.now() - startedAtMs,
  });
  return delaySeconds === null ? { ack: true } : { ack: false, delaySeconds };
}

interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
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
    const res = await fetch(row.url, {
      method: "POST",
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(config.callbackTimeoutMs),
      headers: {
        "Content-Type": "application/json",
        "User-Agent": "Docket-Callbacks/1",
        "Docket-Event": CALLBACK_EVENT,
        "Docket-Run": row.runId,
        "Docket-Attempt": String(attempt),
        [SIGNATURE_HEADER]: await signatureHeader(signingSecrets(org, config.callbackSecretOverlapMs, now), body, now),
      },
    });
    const snippet = await readSnippet(res, 200);
    if (res.status >= 200 && res.status < 300) return { ok: true, statusCode: res.status, error: null };
    return { ok: false, statusCode: res.status, error: `HTTP ${res.status}${snippet ? `: ${snippet}` : ""}` };
  } catch (err) {
    const name = (err as Error)?.name;
    const error = name === "TimeoutError" ? `no answer within ${config.callbackTimeoutMs} ms` : String(err);
    return { ok: false, statusCode: null, error: error.slice(0, 500) };
  }
}

/** The start of a receiver's answer, for last_error; the rest is never read. */
async function readSnippet(res: Response, maxChars: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    for (let chunks = 0; chunks < 8 && text.length < maxChars; chunks++) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // An answer body that breaks off is not the attempt's failure.
  } finally {
    reader.cancel().catch(() => {});
  }
  return text.replace(/\s+/g, " ").trim().slice(0, maxChars);
}
