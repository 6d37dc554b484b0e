// What every concern of a run object shares (../shared/DESIGN.md, "The shape"): its storage, the
// run as last read, apply(), the one way a command changes the run, and the alarm armed from it.
// The run row, its outbox events and any extra rows change together in one transactionSync; every
// write is a compare-and-swap on (state, attempt, version). One alarm, many deadlines
// (../shared/STYLE.md, partywhen's Scheduler), derived from what is stored, never from a caller's
// copy. The rules themselves are the pure decide() in src/run/decide.ts; the modules beside this
// one decide what to do around them.

import { and, eq } from "drizzle-orm";
import type { Config } from "../../src/config";
import type { Env } from "../../src/env";
import { refusal, type Refusal } from "../../src/errors";
import { sha256Hex } from "../../src/lib/crypto";
import { logRun } from "../../src/lib/log";
import { decide } from "../../src/run/decide";
import { reapDeadline } from "../../src/run/rules/reaper";
import { prStepDueAtMs, queuedPublication } from "../../src/run/publication";
import type { RunCommand, RunRecord } from "../../src/run/types";
import { attemptView, leaseWatch, runView, type RunView } from "../../src/run/view";
import { ArtifactStore } from "../artifact-store";
import { CheckpointStore } from "../checkpoint-store";
import { Outbox } from "../outbox";
import { attemptTokens, runTable } from "../run-schema";
import type { StoreDb } from "../store";

/** What a machine's call about its attempt answers. */
export type AttemptAnswer = ReturnType<typeof attemptView>;

/** A change apply() committed: the run, its events' sequence numbers and the alarm it armed (undefined: none written). */
interface Applied {
  run: RunRecord;
  seqs: number[];
  alarmAtMs: number | null | undefined;
}

export class RunCore {
  readonly outbox: Outbox;
  readonly artifacts: ArtifactStore;
  readonly checkpoints: CheckpointStore;

  // In memory only, each safe to lose to an eviction:
  /** The run as last read or written (load()); undefined until the first read. A cache of the run row, read again when lost. */
  private stored: RunRecord | null | undefined = undefined;
  /** Lease calls waiting for a directive (run/leases.ts); an eviction ends their requests, and the runner calls again. */
  readonly leaseWaiters = new Set<() => void>();
  /** The PR step in progress in this instance, so two callers never run it side by side; what it records is in storage, and the alarm takes a step cut short again. */
  publicationStep: Promise<void> | null = null;

  constructor(
    readonly ctx: DurableObjectState,
    readonly env: Env,
    readonly config: Config,
    /** The run's SQLite (durable-objects/run-schema.ts), migrated before any call (durable-objects/store.ts). */
    readonly db: StoreDb,
  ) {
    this.outbox = new Outbox(db, env, config);
    this.artifacts = new ArtifactStore(db);
    this.checkpoints = new CheckpointStore(db);
  }

  /**
   * The stored run, read once per instance and replaced by every write (create, apply), so the
   * several reads of one call parse it once. Shared, so never changed in place: decide() works on
   * a clone.
   */
  load(): RunRecord | null {
    if (this.stored === undefined) {
      const row = this.db.select({ doc: runTable.doc }).from(runTable).limit(1).get();
      this.stored = row ? (JSON.parse(row.doc) as RunRecord) : null;
    }
    return this.stored;
  }

  /** A run just inserted (run/create.ts) is the stored one. */
  created(run: RunRecord): void {
    this.stored = run;
  }

  /**
   * The organization check that precedes every call: members never learn whether another
   * organization has a run (not_found); machines get the definitive other_organization.
   */
  owned(orgId: string, asMachine: boolean): RunRecord | Refusal {
    const run = this.load();
    if (run && run.orgId === orgId) return run;
    if (run && asMachine) return refusal("other_organization", "the run belongs to another organization");
    return refusal("not_found", "no such run");
  }

  /** The run as the API shows it, its patch read back from its chunks. */
  view(run: RunRecord): RunView {
    return runView(this.artifacts.restore(run));
  }

  /** The run's state if it has ended, else null (its event streams close then). */
  endedState(): string | null {
    const run = this.load();
    return run && run.endedAtMs !== null ? run.state : null;
  }

  /**
   * Decides and applies one command in a single transaction: the run row (a compare-and-swap on
   * state, attempt and version), its outbox events, a new patch's chunks and any extra rows written
   * by `alsoWrite`; the alarm is armed from the stored result in the same synchronous step.
   */
  apply(command: RunCommand, opts: { finishedHere?: boolean; alsoWrite?: (run: RunRecord) => void } = {}): Applied | Refusal {
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
      const written = this.db
        .update(runTable)
        .set({ state: next.state, attempt: next.attempt, version: next.version, doc: JSON.stringify(next) })
        .where(and(eq(runTable.id, current.id), eq(runTable.state, current.state), eq(runTable.attempt, current.attempt), eq(runTable.version, current.version)))
        .returning({ id: runTable.id })
        .all();
      if (written.length !== 1) throw new Error(`compare-and-swap lost on run ${current.id}`);
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
   * Arms the alarm at the stored run's next deadline. Synchronous: called right after a
   * transaction, the alarm is written with it, before any await lets another call or a crash in.
   * Answers the time armed. `finishedHere`: the caller finishes the change's side effects right
   * after (a claim), so they set no deadline of their own; a crash before they are done leaves them
   * to the run's next deadline (the launch deadline) or to the next claim that finds its queue row
   * stale.
   */
  armAlarm(graceFromMs = 0, opts: { earliestMs?: number; finishedHere?: boolean; armedAtMs?: number | null } = {}): number | null {
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
  nextDeadlineMs(graceFromMs: number, finishedHere = false): number | null {
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

  private wakeLeaseWaiters(): void {
    for (const done of [...this.leaseWaiters]) done();
  }

  /** The version of the run the D1 queue row was last written at. */
  projectedVersion(): number {
    return this.runColumns().projected_version;
  }

  /** The last attempt whose autopilot slot this run gave back. */
  slotReleasedAttempt(): number {
    return this.runColumns().slot_released_attempt;
  }

  /** The run row's marks of side effects done; the row exists once the run is created. */
  private runColumns(): { projected_version: number; slot_released_attempt: number } {
    const row = this.db.select({ projected_version: runTable.projected_version, slot_released_attempt: runTable.slot_released_attempt }).from(runTable).limit(1).get();
    if (!row) throw new Error("the run object has no run row");
    return row;
  }

  /** The attempt a run-attempt token was issued for, if it was issued by this run. */
  async attemptOfToken(token: string): Promise<{ attempt: number } | undefined> {
    const tokenHash = await sha256Hex(token);
    return this.db.select({ attempt: attemptTokens.attempt }).from(attemptTokens).where(eq(attemptTokens.token_hash, tokenHash)).get();
  }
}
