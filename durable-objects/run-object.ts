// RunObject: one per run, the single authority for that run (../shared/DESIGN.md, "The shape").
// Its state, attempt, lease, stop request, steps, artifact and event outbox live in this object's
// SQLite and change together in one transactionSync; every write is a compare-and-swap on
// (state, attempt, version). The rules themselves are the pure decide() in src/run/decide.ts.

import { DurableObject } from "cloudflare:workers";
import { loadConfig, type Config } from "../src/config";
import type { Env } from "../src/env";
import { DocketError, errorResponse, isRefusal, refusal, type Refusal } from "../src/errors";
import { addCost, addD1, noCost, type Cost } from "../src/lib/cost";
import { newToken, sha256Hex } from "../src/lib/crypto";
import { logRun } from "../src/lib/log";
import { decide, reapDeadline } from "../src/run/decide";
import { HELD_STATES } from "../src/run/states";
import { awaitingPush, prStepDueAtMs, queuedPublication } from "../src/run/publication";
import { admissionDeps } from "../src/autopilot/deps";
import { ticketStub } from "../src/autopilot/admission";
import type { PublicationProvider } from "../src/autopilot/provider";
import { prStep } from "../src/autopilot/publication-step";
import { projectRun } from "../src/run/projection";
import { newQueuedRun, type NewRun } from "../src/run/new-run";
import type { Checkpoint, RunCommand, RunRecord } from "../src/run/types";
import { attemptView, directivePending, leaseWatch, runView, type RunView } from "../src/run/view";
import { labelsKey } from "../src/run/labels";
import { SLOT_STATES } from "../src/autopilot/scheduler-gates";
import { outageMayBeOngoing, readWatermark, reaperGraceFromMs } from "../src/sweep";
import { ArtifactStore } from "./artifact-store";
import { CheckpointStore } from "./checkpoint-store";
import { Outbox, type Sending, type StoredEvent } from "./outbox";
import { RunStreams, STREAM_ORG_HEADER, streamAfter, tooManyStreams } from "./run-streams";
import { RUN_OBJECT_MIGRATIONS } from "./run-schema";
import { migrate } from "./sql-migrations";
import type { ClaimGrant, PushCredential } from "../src/protocol/runners";
import type { BackingAnswer } from "./ticket-object";

export type { NewRun } from "../src/run/new-run";

/** A claimed attempt, as the contract describes it (src/protocol/runners.ts). */
export type { ClaimGrant } from "../src/protocol/runners";

type AttemptAnswer = ReturnType<typeof attemptView>;

/** A change apply() committed: the run, its events' sequence numbers and the alarm it armed (undefined: none written). */
interface Applied {
  run: RunRecord;
  seqs: number[];
  alarmAtMs: number | null | undefined;
}

export class RunObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly config: Config;
  private readonly outbox: Outbox;
  private readonly artifacts: ArtifactStore;
  private readonly checkpoints: CheckpointStore;
  private readonly streams: RunStreams;
  /** Lease calls waiting for a directive (leaseWait); each entry answers its call when called. */
  private readonly leaseWaiters = new Set<() => void>();
  /** The PR step in progress in this instance, so two callers never run it side by side. */
  private publicationStep: Promise<void> | null = null;
  /** The run as last read or written (load()); undefined until the first read. */
  private stored: RunRecord | null | undefined = undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.config = loadConfig(env);
    // The schema first, before any call can read it (durable-objects/run-schema.ts).
    migrate(ctx.storage, RUN_OBJECT_MIGRATIONS);
    this.outbox = new Outbox(ctx.storage, env, this.config);
    this.artifacts = new ArtifactStore(this.sql);
    this.checkpoints = new CheckpointStore(this.sql);
    // Live event streams: every append wakes this run's open streams.
    this.streams = new RunStreams({ after: (seq, limit) => this.outbox.after(seq, limit), endedState: () => this.endedState(), attempt: () => this.load()?.attempt ?? 0 }, this.config);
    this.outbox.onAppend(() => this.streams.wake());
    // A claim's events that an earlier instance never confirmed sent go out again (outbox.markSending).
    const reclaimed = this.outbox.reclaimUnconfirmed(Date.now());
    const run = reclaimed > 0 ? this.load() : null;
    if (run) {
      const at = this.armAlarm();
      logRun("outbox.reclaimed", { run: run.id, attempt: run.attempt, count: reclaimed, retry_at_ms: at, reason: "sent by an earlier instance and never confirmed: sent again" });
    }
  }

  // ---- reads ---------------------------------------------------------------------------------

  /**
   * The stored run, read once per instance and replaced by every write (create, apply), so the
   * several reads of one call parse it once. Shared, so never changed in place: decide() works on
   * a clone.
   */
  private load(): RunRecord | null {
    if (this.stored === undefined) {
      const row = this.sql.exec<{ doc: string }>("SELECT doc FROM run LIMIT 1").toArray()[0];
      this.stored = row ? (JSON.parse(row.doc) as RunRecord) : null;
    }
    return this.stored;
  }

  /**
   * The organization check that precedes every call: members never learn whether another
   * organization has a run (not_found); machines get the definitive other_organization.
   */
  private owned(orgId: string, asMachine: boolean): RunRecord | Refusal {
    const run = this.load();
    if (run && run.orgId === orgId) return run;
    if (run && asMachine) return refusal("other_organization", "the run belongs to another organization");
    return refusal("not_found", "no such run");
  }

  /** The run as the API shows it, its patch read back from its chunks. */
  private view(run: RunRecord): RunView {
    return runView(this.artifacts.restore(run));
  }

  async read(orgId: string): Promise<RunView | Refusal> {
    const run = this.owned(orgId, false);
    return isRefusal(run) ? run : this.view(run);
  }

  async readEvents(
    orgId: string,
    afterSeq: number,
    limit: number,
  ): Promise<{ events: StoredEvent[]; terminal: boolean } | Refusal> {
    const run = this.owned(orgId, false);
    if (isRefusal(run)) return run;
    const pruned = this.prunedRefusal(afterSeq);
    if (pruned) return pruned;
    return { events: this.outbox.after(afterSeq, limit), terminal: run.endedAtMs !== null };
  }

  // ---- creation --------------------------------------------------------------------------------

  /**
   * Creates the run. Called again for an existing run (a replayed dispatch), it changes nothing but
   * finishes what the first call may not have: the queue row, the outbox, the wake-up, the alarm.
   */
  async create(input: NewRun): Promise<RunView> {
    if (this.load()) {
      await this.finishPending({ forceProjection: true, notify: true });
      return this.view(this.load()!);
    }
    const now = Date.now();
    const run = newQueuedRun(input, now);
    let seqs: number[] = [];
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        "INSERT INTO run (id, state, attempt, version, doc) VALUES (?, ?, ?, ?, ?)",
        run.id,
        run.state,
        run.attempt,
        run.version,
        JSON.stringify(run),
      );
      seqs = this.outbox.append(run, [{ type: "run.created", data: { state: run.state, brief: run.brief } }], now);
    });
    this.stored = run;
    this.armAlarm();
    logRun("run.transition", { run: run.id, attempt: run.attempt, seq: seqs[0], from: null, to: "queued", reason: "dispatched", version: run.version });
    await this.finishPending({ notify: true });
    return this.view(run);
  }

  // ---- the runner protocol ---------------------------------------------------------------------

  /** Hands attempt N+1 to a machine; the organization's scheduler calls claimCounted(). */
  async claim(machineId: string): Promise<ClaimGrant | Refusal> {
    return (await this.claimCounted(machineId)).answer;
  }

  /**
   * claim(), with the D1 rows it read and wrote and the Durable Object requests it made.
   * `attempt`: the attempt the scheduler took the run's slot for; another is refused (its queue row was stale).
   */
  async claimCounted(machineId: string, attempt: number | null = null): Promise<{ answer: ClaimGrant | Refusal; cost: Cost }> {
    const cost = noCost();
    const held = await this.ticketHold(machineId, cost);
    if (held) return { answer: held, cost };
    const token = newToken("attempt");
    const tokenHash = await sha256Hex(token);
    // The claim's side effects are finished just below, so its alarm is its launch deadline; they
    // are recorded as done in the claim's own commit, and undone if they fail (finishClaim).
    let sending: Sending | null = null;
    const projectedBefore = this.projectedVersion();
    const result = this.otherAttempt(attempt) ?? this.apply(
      { type: "claim", machineId },
      {
        finishedHere: true,
        alsoWrite: (run) => {
          this.sql.exec("INSERT INTO attempt_tokens (attempt, machine_id, token_hash) VALUES (?, ?, ?)", run.attempt, machineId, tokenHash);
          this.sql.exec("UPDATE run SET projected_version = ?", run.version);
          sending = this.outbox.markSending(run, Date.now());
        },
      },
    );
    if ("error" in result) {
      // A claim that found a stale queue row: the row is repaired and whatever else a crash left
      // pending is finished (the alarm too) before the refusal goes back. No wake-up: the row
      // would only be found again.
      const stale = this.load();
      if (stale) {
        logRun("run.claim_refused", { run: stale.id, attempt: stale.attempt, machine: machineId, code: result.error.code, reason: result.error.message });
        addCost(cost, await this.finishPending({ forceProjection: true, notify: false }));
      }
      return { answer: result, cost };
    }
    const run = result.run;
    addCost(cost, await this.finishClaim(run, projectedBefore, sending, result.alarmAtMs));
    const answer: ClaimGrant = {
      run_id: run.id,
      attempt: run.attempt,
      attempt_token: token,
      lease_expires_at_ms: run.leaseExpiresAtMs!,
      lease_ttl_ms: this.config.leaseTtlMs,
      lease_refresh_ms: this.config.leaseRefreshMs,
      launch_deadline_at_ms: run.launchDeadlineAtMs ?? run.leaseExpiresAtMs!,
      sandbox_lifetime_ms: this.config.sandboxLifetimeMs,
      brief: run.brief,
      repository: run.repository,
      launch: run.launch,
      ...this.pushOnlyJob(run),
      checkpoint: this.grantCheckpoint(run),
    };
    return { answer, cost };
  }

  /** A queued run whose next attempt is not the one the scheduler's slot was taken for refuses the claim. */
  private otherAttempt(attempt: number | null): Refusal | null {
    const run = this.load();
    if (attempt === null || !run || run.state !== "queued" || run.attempt + 1 === attempt) return null;
    return refusal("stale_attempt", `the claim was for attempt ${attempt}; the run's next attempt is ${run.attempt + 1}`, { current_attempt: run.attempt });
  }

  /** A continuation's checkpoint, whole, for the machine that claimed it; null for new work. */
  private grantCheckpoint(run: RunRecord): ClaimGrant["checkpoint"] {
    const c = run.checkpoint;
    if (!c || run.continuation !== "implementing") return null;
    const { patch, session } = this.checkpoints.read();
    return {
      attempt: c.attempt,
      session_id: c.sessionId,
      last_phase: c.lastPhase,
      pending_actions: c.pendingActions,
      session,
      patch,
      source_revision: c.sourceRevision,
      note: c.note,
      at_ms: c.atMs,
    };
  }

  /**
   * The pre-claim recheck of an autopilot run (../shared/spec/run-lifecycle.md, "Queue and
   * dispatch": a queued run whose eligibility lapsed never starts): one request to the ticket that
   * admitted it, which answers from what it recorded, never from the tracker. Not backed: the run is
   * cancelled with the ticket's reason and the claim refused. Ticket unreachable: refused for now,
   * never handed out on a guess. Other runs (no ticket) pay nothing. Null lets the claim go on.
   */
  private async ticketHold(machineId: string, cost: Cost): Promise<Refusal | null> {
    const run = this.load();
    if (!run || run.state !== "queued" || !run.ticketKey) return null;
    cost.doRequests += 1;
    let verdict: BackingAnswer;
    // Runs stored before projectId existed name their project in their metadata (autopilot/admission.ts, runFor).
    const at = { projectId: run.projectId ?? run.metadata.autopilot_project ?? "", ticketKey: run.ticketKey };
    try {
      verdict = await ticketStub(this.env, at).backs(run.id, at);
    } catch (err) {
      logRun("run.claim_refused", { run: run.id, attempt: run.attempt, machine: machineId, code: "ticket_unreachable", reason: `the ticket ${run.ticketKey} could not be asked: ${String(err)}` });
      return refusal("internal", "the run's autopilot ticket could not be asked whether it still backs the run; the claim is refused for now");
    }
    if (verdict.backs === true) return null;
    if (verdict.backs === "unknown") {
      logRun("run.claim_refused", { run: run.id, attempt: run.attempt, machine: machineId, code: "ticket_unsettled", reason: verdict.reason });
      return refusal("internal", `the run's autopilot ticket cannot tell yet whether it backs the run (${verdict.reason}); the claim is refused for now`);
    }
    // Only a run still queued is withdrawn; one that moved on meanwhile is the claim's to refuse.
    if (this.load()?.state !== "queued") return null;
    const result = this.apply({ type: "cancel", by: "autopilot", reason: verdict.reason });
    if ("error" in result) return result;
    addCost(cost, await this.finishPending({ notify: false }));
    logRun("run.claim_refused", { run: run.id, attempt: run.attempt, machine: machineId, code: "ticket_withdrawn", reason: verdict.reason });
    return refusal("invalid_transition", `the run's autopilot ticket no longer backs it (${verdict.reason}); it was cancelled`);
  }

  /** launched, lease, launch-failed, stopped and checkpoint-unusable: calls a machine makes about its attempt. */
  async machineCall(
    orgId: string,
    command: Extract<RunCommand, { type: "launched" | "lease" | "launch_failed" | "stopped" | "checkpoint_unusable" }>,
    waitMs = 0,
  ): Promise<AttemptAnswer | Refusal> {
    const run = this.owned(orgId, true);
    if (isRefusal(run)) return run;
    const answer = await this.attemptCall(command.type === "launch_failed" ? { ...command, jitter: Math.random() } : command);
    if (isRefusal(answer) || waitMs <= 0 || (command.type !== "lease" && command.type !== "launched")) return answer;
    // The lease is renewed only when the call begins: half its TTL at most, so it cannot lapse during the wait.
    const boundMs = Math.min(waitMs, this.config.leaseWaitMaxMs, Math.floor(this.config.leaseTtlMs / 2));
    return this.leaseWait(command.attempt, command.machineId, answer, boundMs);
  }

  /**
   * A renewed lease that waits (docs/protocol.md, "Lease waits"): the answer goes back after
   * `waitMs`, or at once when the run's attempt, state or directives change (apply() wakes it), so
   * a stop request reaches the runner without polling. The lease was renewed when the call began;
   * the answer is the attempt as it stands when the wait ends, or the refusal a lease would get then.
   */
  private async leaseWait(attempt: number, machineId: string, answer: AttemptAnswer, waitMs: number): Promise<AttemptAnswer | Refusal> {
    // A directive pending, or a change since the answer was made (while its side effects were
    // finished), is answered at once; past the bound, a call does not wait.
    const run = this.load();
    if (!run || run.attempt !== answer.attempt || run.state !== answer.state || directivePending(run)) return this.leaseAnswerNow(attempt, machineId);
    if (this.leaseWaiters.size >= this.config.leaseWaitersMax) return answer;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.leaseWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      this.leaseWaiters.add(done);
    });
    return this.leaseAnswerNow(attempt, machineId);
  }

  /** The attempt as it stands, or the refusal a lease would get now; decided, not applied (the lease is not renewed again). */
  private leaseAnswerNow(attempt: number, machineId: string): AttemptAnswer | Refusal {
    const run = this.load();
    if (!run) return refusal("not_found", "no such run");
    const decision = decide(run, { type: "lease", attempt, machineId }, Date.now(), this.config);
    return decision.ok ? attemptView(run) : { error: decision.error };
  }

  private wakeLeaseWaiters(): void {
    for (const done of [...this.leaseWaiters]) done();
  }

  /** A daemon report, authorized by the run-attempt token; it counts as the attempt's heartbeat. */
  async report(
    token: string,
    body: Omit<Extract<RunCommand, { type: "report" }>, "type" | "attempt">,
  ): Promise<AttemptAnswer | Refusal> {
    const row = await this.attemptOfToken(token);
    if (!row) return refusal("unauthorized", "the run-attempt token is not valid for this run");
    // decide() is pure and synchronous: the digest of a patch that may be published is computed here.
    const patch = body.final?.artifact?.patch ?? "";
    const final = body.final && patch.trim() !== "" ? { ...body.final, patchDigest: await sha256Hex(patch) } : body.final;
    return this.attemptCall({ type: "report", attempt: row.attempt, ...body, final });
  }

  // ---- publication (docs/protocol.md, "Publication") ----------------------------------------------------

  /**
   * The runner's push credential: only the machine holding a publishing attempt whose push is not
   * yet reported gets one (the call also renews its lease). Issued by the code host for this one
   * repository, answered once and never stored.
   */
  async pushCredential(orgId: string, attempt: number, machineId: string): Promise<PushCredential | Refusal> {
    const run = this.owned(orgId, true);
    if (isRefusal(run)) return run;
    const check = decide(run, { type: "lease", attempt, machineId }, Date.now(), this.config);
    if (!check.ok) return { error: check.error };
    if (!awaitingPush(run) || !run.publication) return refusal("invalid_transition", `run ${run.id} is ${run.state} and not awaiting a push`, { state: run.state });
    const host = await this.publisher(run);
    if (isRefusal(host)) return host;
    let issued: { token: string; expiresAtMs: number };
    try {
      issued = await host.host.issuePushToken(host.repository);
    } catch (err) {
      logRun("run.push_credential_failed", { run: run.id, attempt, reason: String(err) });
      return refusal("publication_unavailable", `the code host did not issue a push credential: ${err instanceof Error ? err.message : String(err)}`);
    }
    const leased = this.apply({ type: "lease", attempt, machineId });
    if ("error" in leased) return leased;
    return {
      run_id: run.id,
      attempt,
      token: issued.token,
      expires_at_ms: issued.expiresAtMs,
      push_url: run.repository?.url ?? `https://github.com/${host.repository}`,
      branch: run.publication.branch,
      source_revision: run.publication.sourceRevision,
      patch_digest: run.publication.patchDigest,
    };
  }

  /** The runner pushed the branch: recorded, then the alarm takes the PR step (never this request). */
  async pushed(orgId: string, command: Extract<RunCommand, { type: "pushed" }>): Promise<AttemptAnswer | Refusal> {
    const run = this.owned(orgId, true);
    if (isRefusal(run)) return run;
    return this.attemptCall(command);
  }

  /**
   * Recovery of a pending publication before dispatch (src/publication-recovery.ts): a publishing
   * run whose push never came and whose lease is gone pauses at its boundary; a pushed one, or a
   * queued continuation whose branch is pushed, goes on to the PR step. A run the recovery under
   * way (`recoveryEpochMs`) has already reconciled is left as it is.
   */
  async reconcilePublication(graceFromMs: number, recoveryEpochMs = 0): Promise<{ state: string; publication: "pr_step" | "awaiting_push" | "push_job" | "none" }> {
    const before = this.load();
    if (!before) return { state: "missing", publication: "none" };
    if (recoveryEpochMs > 0 && before.recoveredEpochMs === recoveryEpochMs) return { state: before.state, publication: "none" };
    if (before.state === "publishing") this.apply({ type: "deadline", recoveredAtMs: graceFromMs, jitter: Math.random() });
    await this.finishPending({ notify: true, graceFromMs });
    await this.advancePublication();
    const run = this.load()!;
    const what = prStepDueAtMs(run) !== null ? "pr_step" : awaitingPush(run) ? "awaiting_push" : queuedPublication(run) === "push" ? "push_job" : "none";
    return { state: run.state, publication: what };
  }

  /**
   * Recovery after an outage or a deploy (src/recovery.ts; ../shared/spec/run-lifecycle.md,
   * "Completion and recovery"): the run is reconciled against what can confirm it and the
   * observation persisted (`run.recovered`), once per recovery (`epochMs`). The reaper's window
   * starts at the recovery's start: a running attempt gets a full window from then.
   */
  async recover(epochMs: number): Promise<{ state: string; observed: string; problem: string | null }> {
    const run = this.load();
    if (!run) return { state: "missing", observed: "no such run", problem: null };
    if (run.recoveredEpochMs === epochMs) return { state: run.state, observed: "observed already in this recovery", problem: null };
    const { observed, problem } = await this.observeForRecovery(run, epochMs);
    const applied = this.apply({ type: "recovered", epochMs, observed, problem });
    await this.finishPending({ notify: false, graceFromMs: epochMs });
    return { state: isRefusal(applied) ? run.state : applied.run.state, observed, problem };
  }

  /** The recovery `epochMs` passed over this run after `tries` failed tries (src/recovery.ts): recorded as its recovery_failure. */
  async recoveryFailed(epochMs: number, tries: number, error: string): Promise<void> {
    const applied = this.apply({ type: "recovery_failed", epochMs, tries, error });
    if (!isRefusal(applied)) await this.finishPending({ notify: false });
  }

  /** Pending publications against the code host, paused runs against their stored checkpoint, running attempts against their runner. */
  private async observeForRecovery(run: RunRecord, graceFromMs: number): Promise<{ observed: string; problem: string | null }> {
    if (run.state === "publishing" || queuedPublication(run) !== null) {
      const answer = await this.reconcilePublication(graceFromMs);
      return { observed: `publication reconciled against the code host and the branch: ${answer.publication} (now ${answer.state})`, problem: null };
    }
    if (run.state === "paused") return this.verifyStoredCheckpoint(run);
    if (HELD_STATES.includes(run.state)) {
      // The reaper's deadline with the recovery's grace: the runner's next lease refresh or report confirms the attempt, or it is reaped.
      this.apply({ type: "deadline", recoveredAtMs: graceFromMs, jitter: Math.random() });
      const now = this.load()!;
      if (!HELD_STATES.includes(now.state)) return { observed: `attempt ${run.attempt} ended by the reaper: ${now.state}`, problem: null };
      const until = reapDeadline(now, this.config, graceFromMs);
      return {
        observed: `attempt ${now.attempt} on machine ${now.machineId}: awaiting its runner's next report or lease refresh, reaped if none by ${until === null ? "its lease" : new Date(until).toISOString()}`,
        problem: null,
      };
    }
    return { observed: `nothing to reconcile while ${run.state}`, problem: null };
  }

  /** A paused run continues only from a checkpoint whose stored work and session are whole. */
  private verifyStoredCheckpoint(run: RunRecord): { observed: string; problem: string | null } {
    const checkpoint = run.checkpoint;
    if (run.continuation === "publishing") return { observed: "a paused publication: its branch and pull request are reconciled when it resumes", problem: null };
    if (!checkpoint) return { observed: "no checkpoint stored", problem: null };
    const { patch, session } = this.checkpoints.read();
    const whole = patch.length === checkpoint.patchChars && (checkpoint.sessionChars === null || session?.length === checkpoint.sessionChars);
    if (whole) return { observed: `checkpoint of attempt ${checkpoint.attempt} verified against its stored work`, problem: null };
    return { observed: `checkpoint of attempt ${checkpoint.attempt} failed verification`, problem: "recovery found the checkpoint's stored work or session incomplete" };
  }

  /** A push-only job's grant: what to apply and push, so a publication continuation runs no agent. */
  private pushOnlyJob(run: RunRecord): Pick<ClaimGrant, "publication"> {
    if (run.state !== "publishing" || !run.publication) return {};
    const patch = this.artifacts.restore(run).artifact?.patch ?? "";
    return { publication: { branch: run.publication.branch, source_revision: run.publication.sourceRevision, patch } };
  }

  /** The project's code host, or a refusal saying why there is none. */
  private async publisher(run: RunRecord): Promise<{ host: PublicationProvider; repository: string } | Refusal> {
    const deps = admissionDeps();
    const projectId = run.metadata.autopilot_project;
    if (!deps?.publisher || !projectId) return refusal("autopilot_not_configured", "no code host is configured for this run's publication");
    const project = await deps.readProject(this.env, projectId);
    if (!project) return refusal("autopilot_not_configured", `the run's autopilot project ${projectId} no longer exists`);
    return { host: deps.publisher(project, project.secrets, this.config), repository: project.repository };
  }

  /**
   * Moves a pending publication on: a queued continuation whose branch is pushed returns to
   * publishing (no coding turn), and a due PR step runs. One at a time in this instance.
   */
  private async advancePublication(): Promise<void> {
    if (this.publicationStep) return this.publicationStep;
    this.publicationStep = (async () => {
      if (queuedPublication(this.load()!) === "pushed") this.apply({ type: "publish" });
      const run = this.load()!;
      const due = prStepDueAtMs(run);
      if (due === null || due > Date.now()) return;
      const host = await this.publisher(run);
      const record = (command: Parameters<Parameters<typeof prStep>[4]>[0]) => !("error" in this.apply(command));
      if (isRefusal(host)) {
        record({ type: "publish_try", error: host.error.message, retryAtMs: Date.now() + this.config.publicationRetryMs });
      } else {
        await prStep(run, host.host, host.repository, this.config, record);
      }
      await this.finishPending({ notify: false });
    })().finally(() => (this.publicationStep = null));
    return this.publicationStep;
  }

  /**
   * The daemon's checkpoint of a pausing attempt, authorized by the run-attempt token of attempt
   * `attempt`: its description goes on the run, its patch and session beside it, in one transaction.
   */
  async checkpoint(
    token: string,
    attempt: number,
    input: { checkpoint: Omit<Checkpoint, "attempt" | "atMs">; patch: string; session: string | null },
  ): Promise<AttemptAnswer | Refusal> {
    const row = await this.attemptOfToken(token);
    if (!row || row.attempt !== attempt) return refusal("unauthorized", `the run-attempt token is not valid for attempt ${attempt} of this run`);
    const checkpoint: Checkpoint = { ...input.checkpoint, attempt, atMs: Date.now() };
    const result = this.apply({ type: "checkpoint", attempt, checkpoint }, { alsoWrite: () => this.checkpoints.write(input.patch, input.session) });
    if ("error" in result) return result;
    await this.finishPending({ notify: true });
    return attemptView(result.run);
  }

  private async attemptOfToken(token: string): Promise<{ attempt: number } | undefined> {
    const tokenHash = await sha256Hex(token);
    return this.sql.exec<{ attempt: number }>("SELECT attempt FROM attempt_tokens WHERE token_hash = ?", tokenHash).toArray()[0];
  }

  // ---- members and operators ---------------------------------------------------------------------

  async cancel(orgId: string, by: string, reason: string | null): Promise<{ run: RunView; immediate: boolean } | Refusal> {
    const run = this.owned(orgId, false);
    if (isRefusal(run)) return run;
    const result = this.apply({ type: "cancel", by, reason });
    logCancelRequest(this.load() ?? run, by, reason, result);
    if ("error" in result) return result;
    await this.finishPending({ notify: true });
    return { run: this.view(result.run), immediate: result.run.state === "cancelled" };
  }

  /**
   * The pre-claim recheck of an autopilot run (../shared/spec/run-lifecycle.md, "Admission"): the
   * ticket that admitted it no longer backs it (label removed, new blocker, issue closed). A queued
   * run is cancelled with the reason in its history; the check and the cancel are one synchronous
   * step of this object, as a claim is, so the run is either already handed out or never starts.
   */
  async withdraw(orgId: string, reason: string): Promise<{ run: RunView; withdrawn: boolean } | Refusal> {
    const run = this.owned(orgId, false);
    if (isRefusal(run)) return run;
    if (run.state !== "queued") return { run: this.view(run), withdrawn: false };
    const result = this.apply({ type: "cancel", by: "autopilot", reason });
    if ("error" in result) return result;
    await this.finishPending({ notify: false });
    return { run: this.view(result.run), withdrawn: result.run.state === "cancelled" };
  }

  /** Pause, resume, block, authorize and publication steps (operator routes, the scheduler, outbox effects). */
  async control(
    orgId: string,
    command: Extract<
      RunCommand,
      { type: "pause" | "quiesced" | "resume" | "block" | "authorize" | "publish" | "published" | "publish_interrupted" | "publish_failed" }
    >,
  ): Promise<RunView | Refusal> {
    const run = this.owned(orgId, false);
    if (isRefusal(run)) return run;
    const result = this.apply(command);
    if ("error" in result) return result;
    await this.finishPending({ notify: true });
    return this.view(result.run);
  }

  // ---- events: live streams and operator redelivery -------------------------------------------------

  /**
   * The live event stream (GET /v1/runs/:id/events/stream): server-sent events from the outbox,
   * resumable from any sequence number (durable-objects/run-streams.ts). The Worker has authorized
   * the member; the organization it names must own this run.
   */
  async fetch(request: Request): Promise<Response> {
    const run = this.owned(request.headers.get(STREAM_ORG_HEADER) ?? "", false);
    if (isRefusal(run)) return errorResponse(new DocketError(run.error.code, run.error.message));
    const pruned = this.prunedRefusal(streamAfter(request));
    if (pruned) return errorResponse(new DocketError(pruned.error.code, pruned.error.message, { pruned_through_seq: pruned.error.pruned_through_seq }));
    const answer = this.streams.open(run.id, streamAfter(request), Date.now());
    return answer ?? tooManyStreams(this.config.streamsPerRunMax, this.config.streamRetryMs);
  }

  /**
   * Operator redelivery: publishes the events after `afterSeq` again, sent or not; the consumer
   * stores each (run, seq) once (../shared/spec/build-lifecycle.md, "Events and completion retry
   * independently": "Delivery retries send the same job/sequence pair").
   */
  async redeliverEvents(orgId: string, afterSeq: number): Promise<{ requeued: number; outbox: ReturnType<Outbox["status"]> } | Refusal> {
    const run = this.owned(orgId, false);
    if (isRefusal(run)) return run;
    const requeued = this.outbox.requeue(afterSeq, Date.now());
    logRun("outbox.requeued", { run: run.id, attempt: run.attempt, seq: afterSeq, count: requeued, reason: "operator redelivery" });
    await this.finishPending({ notify: false });
    return { requeued, outbox: this.outbox.status() };
  }

  /**
   * The cron tick's retention backstop (src/retention.ts): prunes a batch of this run's sent events
   * if they are due, and has the alarm carry on with the rest. Answers how many are still due.
   */
  async pruneEvents(): Promise<{ left: number }> {
    const run = this.load();
    if (!run) return { left: 0 };
    const now = Date.now();
    this.outbox.prune(run, now);
    const dueAt = this.outbox.pruneDueAtMs(run);
    if (dueAt === null || dueAt > now) return { left: 0 };
    const alarm = await this.ctx.storage.getAlarm();
    if (alarm === null || alarm > now) await this.ctx.storage.setAlarm(now);
    return { left: 1 };
  }

  /** A read that starts before events pruned after the retention is refused, never silently shortened. */
  private prunedRefusal(afterSeq: number): Refusal | null {
    const through = this.outbox.prunedThroughSeq();
    if (afterSeq >= through) return null;
    return refusal("events_pruned", `events up to ${through} were deleted after the retention period; read again from sequence number ${through} (an events page's cursor, the stream's after)`, {
      pruned_through_seq: through,
    });
  }

  private endedState(): string | null {
    const run = this.load();
    return run && run.endedAtMs !== null ? run.state : null;
  }

  // ---- alarm: reaper, queue repair, outbox retry -------------------------------------------------

  /**
   * Acts on due deadlines, then finishes pending side effects. Whatever fails, the alarm is armed
   * again from the stored run (../shared/STYLE.md, "Every failure path keeps the system live"):
   * the exception is logged, not thrown, so the runtime's bounded retries never drop it.
   */
  async alarm(): Promise<void> {
    const run = this.load();
    if (!run) return;
    const graceFromMs = await this.reaperGraceFromMs(run);
    try {
      this.apply({ type: "deadline", recoveredAtMs: graceFromMs, jitter: Math.random() });
      this.outbox.prune(this.load()!, Date.now()); // retention: sent events of a run ended long ago
      await this.finishPending({ notify: true, graceFromMs });
      await this.advancePublication();
    } catch (err) {
      const at = this.armAlarm(graceFromMs, { earliestMs: Date.now() + this.config.alarmRetryMs });
      logRun("run.alarm_failed", { run: run.id, attempt: run.attempt, reason: String(err), retry_at_ms: at });
    }
  }

  /**
   * The cron backstop (src/alarm-backstop.ts) found this run's queue row at `rowVersion`: finish
   * what a crash left pending, and arm the alarm if it is missing or later than the next deadline.
   */
  async ensureAlarm(rowVersion: number, graceFromMs: number): Promise<{ alarm_at_ms: number | null; rearmed: boolean }> {
    const run = this.load();
    if (!run) return { alarm_at_ms: null, rearmed: false };
    await this.repairProjection(rowVersion < run.version);
    await this.outbox.publish(run);
    const armed = await this.ctx.storage.getAlarm();
    const due = this.nextDeadlineMs(graceFromMs);
    if (due === null || (armed !== null && armed <= Math.max(Date.now(), due))) return { alarm_at_ms: armed, rearmed: false };
    const at = this.armAlarm(graceFromMs);
    const now = this.load()!;
    logRun("run.alarm_rearmed", { run: now.id, attempt: now.attempt, state: now.state, reason: armed === null ? "no alarm armed" : "alarm later than its deadline", alarm_at_ms: at });
    return { alarm_at_ms: at, rearmed: true };
  }

  // ---- internals ---------------------------------------------------------------------------------

  private async attemptCall(command: RunCommand): Promise<AttemptAnswer | Refusal> {
    const result = this.apply(command);
    if ("error" in result) return result;
    await this.finishPending({ notify: true });
    return attemptView(result.run);
  }

  /**
   * Decides and applies one command in a single transaction: the run row (a compare-and-swap on
   * state, attempt and version), its outbox events, a new patch's chunks and any extra rows written
   * by `alsoWrite`; the alarm is armed from the stored result in the same synchronous step.
   */
  private apply(command: RunCommand, opts: { finishedHere?: boolean; alsoWrite?: (run: RunRecord) => void } = {}): Applied | Refusal {
    const current = this.load();
    if (!current) return refusal("not_found", "no such run");
    const now = Date.now();
    const decision = decide(current, command, now, this.config);
    if (!decision.ok) return { error: decision.error };
    if (!decision.changed) return { run: current, seqs: [], alarmAtMs: undefined };
    let next = decision.run;
    let seqs: number[] = [];
    this.ctx.storage.transactionSync(() => {
      next = this.artifacts.stash(next);
      const cursor = this.sql.exec(
        "UPDATE run SET state = ?, attempt = ?, version = ?, doc = ? WHERE id = ? AND state = ? AND attempt = ? AND version = ?",
        next.state,
        next.attempt,
        next.version,
        JSON.stringify(next),
        current.id,
        current.state,
        current.attempt,
        current.version,
      );
      if (cursor.rowsWritten !== 1) throw new Error(`compare-and-swap lost on run ${current.id}`);
      seqs = this.outbox.append(next, decision.events, now);
      this.outbox.confirm();
      opts.alsoWrite?.(next);
    });
    this.stored = next;
    const alarmAtMs = this.armAlarm(command.type === "deadline" ? command.recoveredAtMs : 0, { finishedHere: opts.finishedHere });
    if (leaseWatch(current) !== leaseWatch(next)) this.wakeLeaseWaiters();
    // Each hop wrote one run.state event, in order: the line names it and the attempt it records.
    const hopEvents = decision.events.flatMap((e, i) => (e.type === "run.state" ? [{ seq: seqs[i], attempt: e.data.attempt }] : []));
    decision.hops.forEach((hop, i) => {
      const event = hopEvents[i];
      const attempt = typeof event?.attempt === "number" ? event.attempt : next.attempt;
      logRun("run.transition", { run: next.id, attempt, seq: event?.seq ?? null, from: hop.from, to: hop.to, reason: hop.reason, version: next.version });
    });
    return { run: next, seqs, alarmAtMs };
  }

  /**
   * Finishes, from the stored run, the side effects a committed change leaves pending: the queue
   * row, the scheduler's wake-up (when it is claimable), the outbox, then the alarm. Every path that
   * finds the run calls it, so whoever comes after a crash finishes the crashed call's work.
   * Answers with its D1 rows and Durable Object requests.
   */
  private async finishPending(opts: { forceProjection?: boolean; notify: boolean; graceFromMs?: number }): Promise<Cost> {
    const cost = await this.repairProjection(opts.forceProjection ?? false);
    const run = this.load()!;
    if (await this.releaseSlot(run)) cost.doRequests += 1;
    if (opts.notify && run.state === "queued" && run.notBeforeMs <= Date.now()) {
      await this.notifyScheduler(run);
      cost.doRequests += 1;
    }
    await this.outbox.publish(run);
    this.armAlarm(opts.graceFromMs ?? 0);
    return cost;
  }

  /**
   * finishPending() for a claim, whose commit already recorded the queue row written and the events
   * sent (claimCounted). Its events (run.state claimed) have no side effects for the consumer, so
   * they are stored in the queue row's own D1 batch (outbox.split), and any due event that has some
   * goes to the Queue at the same time: one round trip before the grant, and no commit after it
   * unless one failed. A failed queue row write is recorded as not made, failed events as unsent,
   * and the alarm retries them (the events through the Queue); a crash before either is repaired by
   * whoever finds the run next (a stale queue row refuses its claim and is rewritten; events never
   * confirmed go out again from the next instance). A claimed run needs no wake-up, and holds no
   * autopilot slot to give back.
   */
  private async finishClaim(run: RunRecord, projectedBefore: number, sending: Sending | null, armedAtMs: number | null | undefined): Promise<Cost> {
    const { send, store } = sending ? this.outbox.split(sending) : { send: null, store: null };
    const [projected] = await Promise.all([this.writeQueueRow(run, store ? this.outbox.inserts(store) : []), send ? this.outbox.sendMarked(run, send) : null]);
    if (store) this.outbox.storedMarked(run, store, projected);
    if (!projected.ok) this.sql.exec("UPDATE run SET projected_version = ? WHERE projected_version = ?", projectedBefore, run.version);
    this.armAlarm(0, { armedAtMs });
    return projected.cost;
  }

  private slotReleasedAttempt(): number {
    return this.sql.exec<{ a: number }>("SELECT slot_released_attempt AS a FROM run LIMIT 1").one().a;
  }

  private projectedVersion(): number {
    return this.sql.exec<{ v: number }>("SELECT projected_version AS v FROM run LIMIT 1").one().v;
  }

  /**
   * Writes the D1 queue row when it is behind this object (or, forced, when it may be lying); the
   * write only lands over an older version. A failure is retried from the alarm.
   */
  private async repairProjection(force: boolean): Promise<Cost> {
    const run = this.load();
    if (!run || (!force && this.projectedVersion() >= run.version)) return noCost();
    const { ok, cost } = await this.writeQueueRow(run);
    if (ok) this.sql.exec("UPDATE run SET projected_version = ? WHERE projected_version < ?", run.version, run.version);
    return cost;
  }

  /** One write of the run's D1 queue row, with `also` in its batch; a failure is logged and answered, never thrown. */
  private async writeQueueRow(run: RunRecord, also: D1PreparedStatement[] = []): Promise<{ ok: boolean; cost: Cost; error: unknown }> {
    const cost = noCost();
    try {
      addD1(cost, await projectRun(this.env.DB, run, also));
      return { ok: true, cost, error: null };
    } catch (err) {
      logRun("run.projection_failed", { run: run.id, attempt: run.attempt, version: run.version, reason: `the queue row was not written: ${String(err)}` });
      return { ok: false, cost, error: err };
    }
  }

  /**
   * An autopilot run that was handed out and no longer executes (queued again, paused, blocked,
   * ended) gives back its attempt's slot, and only that attempt's (docs/protocol.md, "Autopilot
   * scheduler"). Once per attempt, recorded in storage so a new instance after an eviction does
   * not ask again; a lost call is caught by the scheduler's backstop. Answers whether it asked.
   */
  private async releaseSlot(run: RunRecord): Promise<boolean> {
    if (!run.projectId || run.attempt === 0 || SLOT_STATES.has(run.state) || this.slotReleasedAttempt() >= run.attempt) return false;
    try {
      await this.env.SCHEDULER.get(this.env.SCHEDULER.idFromName(run.orgId)).releaseSlot(run.id, run.attempt);
      this.sql.exec("UPDATE run SET slot_released_attempt = ? WHERE slot_released_attempt < ?", run.attempt, run.attempt);
    } catch (err) {
      logRun("run.slot_release_failed", { run: run.id, attempt: run.attempt, reason: `the scheduler was not told: ${String(err)}` });
    }
    return true;
  }

  private async notifyScheduler(run: RunRecord): Promise<void> {
    try {
      const scheduler = this.env.SCHEDULER.get(this.env.SCHEDULER.idFromName(run.orgId));
      await scheduler.notifyWork(labelsKey(run.launch.protocol, run.labels));
    } catch (err) {
      logRun("run.notify_failed", { run: run.id, attempt: run.attempt, reason: `the scheduler was not woken: ${String(err)}` });
    }
  }

  /**
   * When the reaper's window starts (src/sweep.ts, reaperGraceFromMs). A watermark D1 cannot give
   * counts as an outage: the run gets the window from now, never a reap on a guess.
   */
  private async reaperGraceFromMs(run: RunRecord): Promise<number> {
    try {
      const watermark = await readWatermark(this.env.DB);
      const now = Date.now();
      if (watermark && outageMayBeOngoing(watermark.lastTickAtMs, now, this.config.sweepOutageThresholdMs)) {
        logRun("run.sweep_stale", { run: run.id, attempt: run.attempt, last_tick_at_ms: watermark.lastTickAtMs, reason: "no cron tick since an outage: the staleness window starts now" });
      }
      return reaperGraceFromMs(watermark, now, this.config.sweepOutageThresholdMs);
    } catch (err) {
      logRun("run.watermark_unavailable", { run: run.id, attempt: run.attempt, reason: `the staleness window starts now: ${String(err)}` });
      return reaperGraceFromMs("unavailable", Date.now(), this.config.sweepOutageThresholdMs);
    }
  }

  /**
   * One alarm, many deadlines (../shared/STYLE.md, partywhen's Scheduler), derived from what is
   * stored, never from a caller's copy. Synchronous: called right after a transaction, the alarm is
   * written with it, before any await lets another call or a crash in. Answers the time armed.
   * `finishedHere`: the caller finishes the change's side effects right after (a claim), so they
   * set no deadline of their own; a crash before they are done leaves them to the run's next
   * deadline (the launch deadline) or to the next claim that finds its queue row stale.
   */
  private armAlarm(graceFromMs = 0, opts: { earliestMs?: number; finishedHere?: boolean; armedAtMs?: number | null } = {}): number | null {
    const due = this.nextDeadlineMs(graceFromMs, opts.finishedHere);
    const at = due === null ? null : Math.max(opts.earliestMs ?? Date.now(), due);
    // Armed so by this call already (a claim's change): one alarm write, not one per step.
    if (at === opts.armedAtMs) return at;
    const write = at === null ? this.ctx.storage.deleteAlarm() : this.ctx.storage.setAlarm(at);
    write.catch((err) => {
      const run = this.load();
      if (run) logRun("run.alarm_write_failed", { run: run.id, attempt: run.attempt, reason: String(err) });
    });
    return at;
  }

  /**
   * The stored run's earliest deadline: the reaper's, the end of a backoff, and the retry of side
   * effects still pending (a change's own caller finishes them first; if it never does, this does).
   */
  private nextDeadlineMs(graceFromMs: number, finishedHere = false): number | null {
    const run = this.load();
    if (!run) return null;
    const now = Date.now();
    const retryAt = now + this.config.outboxBackoffMs;
    const deadlines: number[] = [];
    const reap = reapDeadline(run, this.config, graceFromMs);
    if (reap !== null) deadlines.push(reap);
    if (run.state === "queued" && run.notBeforeMs > now) deadlines.push(run.notBeforeMs);
    const prStepAt = prStepDueAtMs(run); // publication: Docket's PR step, or a pushed continuation to resume
    if (prStepAt !== null) deadlines.push(prStepAt);
    if (queuedPublication(run) === "pushed") deadlines.push(now);
    if (!finishedHere) {
      if (this.projectedVersion() < run.version) deadlines.push(retryAt);
      const outboxAt = this.outbox.nextAttemptAtMs();
      if (outboxAt !== null) deadlines.push(Math.max(outboxAt, retryAt));
    }
    const pruneAt = this.outbox.pruneDueAtMs(run); // retention (durable-objects/outbox.ts)
    if (pruneAt !== null) deadlines.push(pruneAt);
    return deadlines.length === 0 ? null : Math.min(...deadlines);
  }
}

/**
 * One line per cancel request, accepted or refused: who asked, why, and whether the run ended at
 * once or its runner was asked to stop (../shared/spec/dispatch-lifecycle.md, "Decisions").
 */
function logCancelRequest(run: RunRecord, by: string, reason: string | null, result: { run: RunRecord; seqs: number[] } | Refusal): void {
  const outcome = "error" in result ? "refused" : result.run.state === "cancelled" ? "cancelled" : "stop_requested";
  logRun("run.cancel_requested", {
    run: run.id,
    attempt: run.attempt,
    seq: "error" in result ? null : (result.seqs[result.seqs.length - 1] ?? null),
    by,
    reason: reason ?? "no reason given",
    immediate: outcome === "cancelled",
    outcome,
    refusal: "error" in result ? result.error.code : null,
    state: run.state,
  });
}
