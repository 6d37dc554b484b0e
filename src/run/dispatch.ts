// Creating a run with an optional idempotency key: the domain half of POST /v1/runs, also used by
// build jobs (src/builds/run-engine.ts), so the route only translates HTTP to this call and back.

import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { loadConfig } from "../config";
import { idempotencyKeys } from "../db/schema";
import type { Env } from "../env";
import { DocketError } from "../errors";
import { canonicalJson } from "../lib/canonical-json";
import { newId, sha256Hex } from "../lib/crypto";
import { runStub } from "../lib/stubs";
import { keyExpired } from "./idempotency";
import { normalizeLabels } from "./labels";
import { launchSpec } from "./launch";

/**
 * A dispatch as the API takes it (field names of the request body, already validated). An
 * Idempotency-Key is bound to its canonical JSON with every default filled in (dispatchedPayload),
 * so a body that spells out a default makes the same run.
 */
export interface DispatchInput {
  brief: string;
  repository?: { url: string; commit?: string | null } | null;
  labels?: string[];
  priority?: number;
  launch: { protocol?: string; command: string[]; image?: string | null; env?: Record<string, string> };
  callback_url?: string | null;
  metadata?: Record<string, string>;
}

/**
 * Creates a run, or replays it for a repeated Idempotency-Key with the same payload. The key is
 * claimed before the run object exists, so a crash in between is finished by the retry; a replay
 * that finds the run also finishes its queue row, events and alarm (RunObject.create). `runId`: an
 * id the caller recorded before this call (autopilot admission, without a key): called again, it
 * finds that same run, whenever that is.
 */
export async function dispatchRun(env: Env, orgId: string, body: DispatchInput, key: string | null, opts: { runId?: string; ticketKey?: string; projectId?: string } = {}) {
  const payload = dispatchedPayload(body);
  const claimed = key === null ? { runId: opts.runId ?? newId("run"), replayed: false } : await claimKey(env, orgId, key, await payloadHashes(payload, body));
  const runId = claimed.runId;
  const run = await runStub(env, runId).create({
    id: runId,
    orgId,
    brief: payload.brief,
    repository: payload.repository,
    labels: payload.labels,
    priority: payload.priority,
    launch: payload.launch,
    callbackUrl: payload.callback_url,
    metadata: payload.metadata,
    ...(opts.ticketKey ? { ticketKey: opts.ticketKey } : {}),
    ...(opts.projectId ? { projectId: opts.projectId } : {}),
    createdAtMs: Date.now(),
  });
  return { run, replayed: claimed.replayed };
}

/** The run a dispatch makes: its body with every default filled in and its labels normalized. */
function dispatchedPayload(body: DispatchInput) {
  return {
    brief: body.brief,
    repository: body.repository ? { url: body.repository.url, commit: body.repository.commit ?? null } : null,
    labels: normalizeLabels(body.labels ?? []),
    priority: body.priority ?? 0,
    launch: launchSpec(body.launch),
    callback_url: body.callback_url ?? null,
    metadata: body.metadata ?? {},
  };
}

/** The hashes a key's payload may match: the payload's, then (keys bound before defaults were filled in) the body's as it was sent. */
async function payloadHashes(payload: ReturnType<typeof dispatchedPayload>, body: DispatchInput): Promise<string[]> {
  return [await sha256Hex(canonicalJson(payload)), await sha256Hex(canonicalJson(body))];
}

/**
 * Binds the key to a new run id (under the first of `hashes`), or finds the run it already names
 * (a payload hashing to any of them) or refuses (another payload).
 */
async function claimKey(env: Env, orgId: string, key: string, hashes: string[]): Promise<{ runId: string; replayed: boolean }> {
  const payloadHash = hashes[0];
  const db = drizzle(env.DB);
  const runId = newId("run");
  const inserted = await db
    .insert(idempotencyKeys)
    .values({ orgId, key, payloadHash, runId, createdAtMs: Date.now() })
    // A key older than IDEMPOTENCY_KEY_TTL_MS is taken over: it names the new run from now on.
    .onConflictDoUpdate({
      target: [idempotencyKeys.orgId, idempotencyKeys.key],
      set: { payloadHash, runId, createdAtMs: Date.now() },
      setWhere: keyExpired(Date.now() - loadConfig(env).idempotencyKeyTtlMs),
    })
    .returning({ runId: idempotencyKeys.runId });
  if (inserted.length > 0) return { runId, replayed: false };
  const existing = await db
    .select()
    .from(idempotencyKeys)
    .where(and(eq(idempotencyKeys.orgId, orgId), eq(idempotencyKeys.key, key)))
    .get();
  if (!existing) throw new DocketError("internal", "idempotency key vanished");
  if (!hashes.includes(existing.payloadHash)) {
    throw new DocketError("idempotency_conflict", "this Idempotency-Key was used with another payload", {
      run_id: existing.runId,
    });
  }
  return { runId: existing.runId, replayed: true };
}
