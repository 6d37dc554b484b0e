// RunObject: one per run, the single authority for that run (../shared/DESIGN.md, "The shape").
// This class owns the object's storage, its alarm and its RPC entry points; what each call decides
// lives in durable-objects/run/, one module per concern: the run's storage, apply() and its alarm
// (core), creation, claims, reports and leases, publication, pause and checkpoint, recovery,
// member and operator controls, events, the side effects a change leaves pending, and the alarm's
// work.
// The run's transition rules are the pure decide() in src/run/decide.ts.

import { DurableObject } from "cloudflare:workers";
import { loadConfig } from "../src/config";
import type { Env } from "../src/env";
import { isRefusal, type Refusal } from "../src/errors";
import type { Cost } from "../src/lib/cost";
import type { ClaimGrant, PushCredential } from "../src/protocol/runners";
import type { NewRun } from "../src/run/new-run";
import type { Checkpoint, RunCommand } from "../src/run/types";
import type { RunView } from "../src/run/view";
import type { Outbox, StoredEvent } from "./outbox";
import { ensureAlarm, onAlarm } from "./run/alarm";
import { storeCheckpoint } from "./run/checkpoint";
import { claimCounted } from "./run/claim";
import { cancel, control, withdraw, type ControlCommand } from "./run/controls";
import { RunCore, type AttemptAnswer } from "./run/core";
import { createRun } from "./run/create";
import { openStream, pruneEvents, readEvents, readNewestEvents, redeliverEvents } from "./run/events";
import { machineCall, report, type MachineCommand, type ReportBody } from "./run/leases";
import { resendUnconfirmed } from "./run/pending";
import { pushCredential, pushed, reconcilePublication, type PublicationReconciled } from "./run/publication";
import { recover, recoveryFailed, type Recovered } from "./run/recovery";
import { RunStreams } from "./run-streams";
import { migrateOnStart, storeDb } from "./store";
import { RUN_STORE } from "./stores";

export type { NewRun } from "../src/run/new-run";

/** A claimed attempt, as the contract describes it (src/protocol/runners.ts). */
export type { ClaimGrant } from "../src/protocol/runners";

export class RunObject extends DurableObject<Env> {
  /** The run's storage, its cached record and apply() (durable-objects/run/core.ts lists what it keeps in memory). */
  private readonly core: RunCore;
  /** Live event streams (durable-objects/run-streams.ts): in memory; an eviction ends them and clients resume from their last sequence number. */
  private readonly streams: RunStreams;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const config = loadConfig(env);
    const core = (this.core = new RunCore(ctx, env, config, storeDb(ctx)));
    // Every append wakes this run's open streams.
    this.streams = new RunStreams({ after: (seq, limit) => core.outbox.after(seq, limit), endedState: () => core.endedState(), attempt: () => core.load()?.attempt ?? 0 }, config);
    core.outbox.onAppend(() => this.streams.wake());
    // The schema before any call can read it (durable-objects/run-schema.ts); then a claim's events
    // an earlier instance never confirmed sent go out again.
    migrateOnStart(ctx, core.db, RUN_STORE, () => resendUnconfirmed(core));
  }

  // ---- reads and creation ------------------------------------------------------------------------

  async read(orgId: string): Promise<RunView | Refusal> {
    const run = this.core.owned(orgId, false);
    return isRefusal(run) ? run : this.core.view(run);
  }

  async create(input: NewRun): Promise<RunView> {
    return createRun(this.core, input);
  }

  // ---- the runner protocol: claim (run/claim.ts), reports and leases (run/leases.ts) ----------------

  /** Hands attempt N+1 to a machine; the organization's scheduler calls claimCounted(). */
  async claim(machineId: string): Promise<ClaimGrant | Refusal> {
    return (await this.claimCounted(machineId)).answer;
  }

  async claimCounted(machineId: string, attempt: number | null = null): Promise<{ answer: ClaimGrant | Refusal; cost: Cost }> {
    return claimCounted(this.core, machineId, attempt);
  }

  async machineCall(orgId: string, command: MachineCommand, waitMs = 0): Promise<AttemptAnswer | Refusal> {
    return machineCall(this.core, orgId, command, waitMs);
  }

  async report(token: string, body: ReportBody): Promise<AttemptAnswer | Refusal> {
    return report(this.core, token, body);
  }

  // ---- publication (run/publication.ts) --------------------------------------------------------------

  async pushCredential(orgId: string, attempt: number, machineId: string): Promise<PushCredential | Refusal> {
    return pushCredential(this.core, orgId, attempt, machineId);
  }

  async pushed(orgId: string, command: Extract<RunCommand, { type: "pushed" }>): Promise<AttemptAnswer | Refusal> {
    return pushed(this.core, orgId, command);
  }

  async reconcilePublication(graceFromMs: number, recoveryEpochMs = 0): Promise<PublicationReconciled> {
    return reconcilePublication(this.core, graceFromMs, recoveryEpochMs);
  }

  // ---- pause and checkpoint (run/checkpoint.ts), recovery (run/recovery.ts) --------------------------

  async checkpoint(
    token: string,
    attempt: number,
    input: { checkpoint: Omit<Checkpoint, "attempt" | "atMs">; patch: string; session: string | null },
  ): Promise<AttemptAnswer | Refusal> {
    return storeCheckpoint(this.core, token, attempt, input);
  }

  async recover(epochMs: number): Promise<Recovered> {
    return recover(this.core, epochMs);
  }

  async recoveryFailed(epochMs: number, tries: number, error: string): Promise<void> {
    return recoveryFailed(this.core, epochMs, tries, error);
  }

  // ---- members and operators (run/controls.ts) --------------------------------------------------------

  async cancel(orgId: string, by: string, reason: string | null): Promise<{ run: RunView; immediate: boolean } | Refusal> {
    return cancel(this.core, orgId, by, reason);
  }

  async withdraw(orgId: string, reason: string): Promise<{ run: RunView; withdrawn: boolean } | Refusal> {
    return withdraw(this.core, orgId, reason);
  }

  async control(orgId: string, command: ControlCommand): Promise<RunView | Refusal> {
    return control(this.core, orgId, command);
  }

  // ---- events: pages, live streams, redelivery, retention (run/events.ts) ----------------------------

  async readEvents(orgId: string, afterSeq: number, limit: number): Promise<{ events: StoredEvent[]; terminal: boolean } | Refusal> {
    return readEvents(this.core, orgId, afterSeq, limit);
  }

  async readNewestEvents(orgId: string, beforeSeq: number | null, limit: number): Promise<{ events: StoredEvent[]; terminal: boolean; prunedThroughSeq: number } | Refusal> {
    return readNewestEvents(this.core, orgId, beforeSeq, limit);
  }

  /** The live event stream (GET /v1/runs/:id/events/stream). */
  async fetch(request: Request): Promise<Response> {
    return openStream(this.core, this.streams, request);
  }

  async redeliverEvents(orgId: string, afterSeq: number): Promise<{ requeued: number; outbox: ReturnType<Outbox["status"]> } | Refusal> {
    return redeliverEvents(this.core, orgId, afterSeq);
  }

  async pruneEvents(): Promise<{ left: number }> {
    return pruneEvents(this.core);
  }

  // ---- the alarm: reaper, queue repair, outbox retry, PR step (run/alarm.ts) ------------------------

  async alarm(): Promise<void> {
    return onAlarm(this.core);
  }

  async ensureAlarm(rowVersion: number, graceFromMs: number): Promise<{ alarm_at_ms: number | null; rearmed: boolean }> {
    return ensureAlarm(this.core, rowVersion, graceFromMs);
  }
}
