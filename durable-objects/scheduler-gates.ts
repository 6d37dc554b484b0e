// The scheduler gates' durable state, kept in the organization's SchedulerObject SQLite because
// that object serializes claims (../shared/DESIGN.md, "Scheduler gates live where claims are
// serialized"). Every method is synchronous: a claim checks a candidate's gates and takes its slot
// in one step, with no await between them, however many claims run at once.

import { and, asc, count, eq, inArray, sql, sum } from "drizzle-orm";
import { budgetHolds, projectGates, slots } from "./scheduler-schema";
import { ClosedProjects, type ClosedVerdict } from "./scheduler/closed-projects";
import type { StoreDb } from "./store";
import {
  DEFAULT_GATES,
  firstClosed,
  gateVerdicts,
  nextWindowEdgeMs,
  type DispatchWindow,
  type GateName,
  type GateUsage,
  type GateVerdict,
  type ProjectGates,
} from "../src/autopilot/scheduler-gates";

/** A queue row the claim considers: runs without a project pass every gate. */
export interface GateCandidate {
  id: string;
  project_id: string | null;
  /** The attempt its claim would start (the queued row's attempt + 1): the slot's key with the run. */
  attempt: number;
}

/** A slot the backstop checks against its run object; attempt 0: taken before slots had attempts. */
export type SlotRow = {
  run_id: string;
  attempt: number;
  project_id: string;
  org_id: string;
  taken_at_ms: number;
};

/** A gate's answer: admitted (with a new budget hold of `newHoldCents`, if one was taken), or refused. */
export type Admission =
  | { ok: true; projectId: string | null; newHoldCents: number | null }
  | { ok: false; projectId: string; gate: GateName; reason: string };

/** A change to a project's gates; absent fields stay as they are. */
export interface GatesChange {
  enabled?: boolean;
  draining?: boolean;
  window?: DispatchWindow | null;
  concurrency?: number | null;
  budget?: { limitCents: number; perRunCents: number } | null;
  resetBudget?: boolean;
}

export type SlotHolder = {
  run_id: string;
  attempt: number;
  taken_at_ms: number;
};

/** Where a budget hold ends: settled (its cost counts as spent) or review (kept held for an admin). */
export type HoldEnd = { status: "settled"; costCents: number } | { status: "review"; costCents: number | null };

/** An autopilot project's scheduler as the API shows it (docs/protocol.md, "Autopilot scheduler"). */
export interface SchedulerView {
  gates: ReturnType<SchedulerGates["read"]>;
  concurrency_limit: number;
  slots: { run_id: string; attempt: number; taken_at_ms: number }[];
  budget_held_cents: number;
  budget_spent_cents: number;
  verdicts: GateVerdict[];
  admission: string | null;
}

export class SchedulerGates {
  /** The projects closed to every queued run, per project (scheduler/closed-projects.ts), in memory only (SchedulerObject lists why that is safe). */
  private readonly closed = new ClosedProjects(
    () =>
      this.db
        .select({ id: projectGates.project_id })
        .from(projectGates)
        .union(this.db.select({ id: slots.project_id }).from(slots))
        .all()
        .map((r) => r.id),
    (projectId, nowMs) => this.closedVerdict(projectId, nowMs),
  );

  /** Its tables: project_gates, slots and budget_holds (durable-objects/scheduler-schema.ts). */
  constructor(
    private readonly db: StoreDb,
    private readonly defaultConcurrency: number,
  ) {}

  private row(projectId: string) {
    return this.db.select().from(projectGates).where(eq(projectGates.project_id, projectId)).get() ?? null;
  }

  read(projectId: string): ProjectGates & { spentCents: number; resetAtMs: number | null; updatedAtMs: number | null } {
    const row = this.row(projectId);
    if (!row) return { ...DEFAULT_GATES, spentCents: 0, resetAtMs: null, updatedAtMs: null };
    return {
      enabled: row.enabled === 1,
      draining: row.draining === 1,
      window: row.dispatch_window ? (JSON.parse(row.dispatch_window) as DispatchWindow) : null,
      concurrency: row.concurrency,
      budget: row.budget_limit_cents === null || row.budget_per_run_cents === null ? null : { limitCents: row.budget_limit_cents, perRunCents: row.budget_per_run_cents },
      spentCents: row.budget_spent_cents,
      resetAtMs: row.budget_reset_at_ms,
      updatedAtMs: row.updated_at_ms,
    };
  }

  /** Applies a change; a budget reset starts the spent count again at zero (held reservations stay). */
  change(projectId: string, change: GatesChange, nowMs: number): void {
    const now = this.read(projectId);
    const next: ProjectGates = {
      enabled: change.enabled ?? now.enabled,
      draining: change.draining ?? now.draining,
      window: change.window === undefined ? now.window : change.window,
      concurrency: change.concurrency === undefined ? now.concurrency : change.concurrency,
      budget: change.budget === undefined ? now.budget : change.budget,
    };
    const spent = change.resetBudget ? 0 : now.spentCents;
    const resetAt = change.resetBudget ? nowMs : now.resetAtMs;
    const set = {
      enabled: next.enabled ? 1 : 0,
      draining: next.draining ? 1 : 0,
      dispatch_window: next.window ? JSON.stringify(next.window) : null,
      concurrency: next.concurrency,
      budget_limit_cents: next.budget?.limitCents ?? null,
      budget_per_run_cents: next.budget?.perRunCents ?? null,
      budget_spent_cents: spent,
      budget_reset_at_ms: resetAt,
      updated_at_ms: nowMs,
    };
    this.db
      .insert(projectGates)
      .values({ project_id: projectId, ...set })
      .onConflictDoUpdate({ target: projectGates.project_id, set })
      .run();
    this.closed.changed(projectId);
  }

  usage(projectId: string): GateUsage {
    const taken = this.db.select({ n: count() }).from(slots).where(eq(slots.project_id, projectId)).get()?.n ?? 0;
    const held = this.db
      .select({ c: sum(budgetHolds.reserved_cents).mapWith(Number) })
      .from(budgetHolds)
      .where(and(eq(budgetHolds.project_id, projectId), inArray(budgetHolds.status, ["held", "review"])))
      .get()?.c ?? 0;
    return { slotsInUse: taken, heldCents: held, spentCents: this.read(projectId).spentCents };
  }

  verdicts(projectId: string, nowMs: number, holdsBudget = false): GateVerdict[] {
    return gateVerdicts(this.read(projectId), this.usage(projectId), nowMs, this.defaultConcurrency, holdsBudget);
  }

  private holds(runId: string): boolean {
    return this.db.select({ run_id: budgetHolds.run_id }).from(budgetHolds).where(eq(budgetHolds.run_id, runId)).get() !== undefined;
  }

  /**
   * Checks every gate of the candidate's project and, when all are open, takes its slot and (for a
   * project with a budget, a run that holds none yet) its budget hold, in this one synchronous step.
   */
  admit(orgId: string, candidate: GateCandidate, nowMs: number): Admission {
    const projectId = candidate.project_id;
    if (!projectId) return { ok: true, projectId: null, newHoldCents: null };
    if (this.db.select({ run_id: slots.run_id }).from(slots).where(eq(slots.run_id, candidate.id)).limit(1).get() !== undefined) {
      return { ok: false, projectId, gate: "concurrency", reason: "the run already holds a slot" };
    }
    const holdsBudget = this.holds(candidate.id);
    const closed = firstClosed(this.verdicts(projectId, nowMs, holdsBudget));
    if (closed) return { ok: false, projectId, gate: closed.gate, reason: closed.reason };
    this.db.insert(slots).values({ run_id: candidate.id, attempt: candidate.attempt, project_id: projectId, org_id: orgId, taken_at_ms: nowMs, checked_at_ms: nowMs }).run();
    this.closed.changed(projectId);
    const budget = this.read(projectId).budget;
    if (!budget || holdsBudget) return { ok: true, projectId, newHoldCents: null };
    this.db
      .insert(budgetHolds)
      .values({ run_id: candidate.id, project_id: projectId, reserved_cents: budget.perRunCents, status: "held", cost_cents: null, created_at_ms: nowMs, updated_at_ms: nowMs })
      .run();
    return { ok: true, projectId, newHoldCents: budget.perRunCents };
  }

  /**
   * Gives back the slot of the run's `attempt`, never another attempt's (a release that arrives
   * late leaves the slot taken for the next one); a slot taken before slots had attempts (0) goes
   * with any. Answers whether it held one.
   */
  release(runId: string, attempt: number): boolean {
    const released = this.db
      .delete(slots)
      .where(and(eq(slots.run_id, runId), inArray(slots.attempt, [attempt, 0])))
      .returning({ project_id: slots.project_id })
      .all();
    for (const slot of released) this.closed.changed(slot.project_id);
    return released.length > 0;
  }

  /** Drops a budget hold that never became a ledger reservation (the claim did not go through). */
  dropHold(runId: string): void {
    this.db.delete(budgetHolds).where(and(eq(budgetHolds.run_id, runId), eq(budgetHolds.status, "held"))).run();
  }

  /** Ends a run's budget hold once: settled adds its cost to the project's spent count. Answers whether it changed. */
  endHold(runId: string, end: HoldEnd, nowMs: number): boolean {
    return this.moveHold(runId, ["held"], end, nowMs);
  }

  /**
   * An admin resolved the run's reservation held for review with `costCents`: the hold settles and
   * its project's spent count grows by that cost, once. A hold still `held` (the run's end not yet
   * applied here) settles the same way, so the two paths meet in one state whichever comes first.
   */
  settleReviewedHold(runId: string, costCents: number, nowMs: number): boolean {
    return this.moveHold(runId, ["held", "review"], { status: "settled", costCents }, nowMs);
  }

  private moveHold(runId: string, from: ("held" | "review")[], end: HoldEnd, nowMs: number): boolean {
    const held = and(eq(budgetHolds.run_id, runId), inArray(budgetHolds.status, from));
    const row = this.db.select({ project_id: budgetHolds.project_id }).from(budgetHolds).where(held).get();
    if (!row) return false;
    this.db.update(budgetHolds).set({ status: end.status, cost_cents: end.costCents, updated_at_ms: nowMs }).where(held).run();
    if (end.status === "settled") {
      this.db
        .update(projectGates)
        .set({ budget_spent_cents: sql`${projectGates.budget_spent_cents} + ${end.costCents}` })
        .where(eq(projectGates.project_id, row.project_id))
        .run();
    }
    return true;
  }

  slotHolders(projectId: string, limit: number): SlotHolder[] {
    return this.db
      .select({ run_id: slots.run_id, attempt: slots.attempt, taken_at_ms: slots.taken_at_ms })
      .from(slots)
      .where(eq(slots.project_id, projectId))
      .orderBy(asc(slots.taken_at_ms), asc(slots.run_id))
      .limit(limit)
      .all();
  }

  /** The slots checked longest ago, for the backstop; each is marked checked now. */
  oldestChecked(limit: number, nowMs: number): SlotRow[] {
    const rows = this.db
      .select({ run_id: slots.run_id, attempt: slots.attempt, project_id: slots.project_id, org_id: slots.org_id, taken_at_ms: slots.taken_at_ms })
      .from(slots)
      .orderBy(asc(slots.checked_at_ms), asc(slots.run_id))
      .limit(limit)
      .all();
    for (const r of rows) this.db.update(slots).set({ checked_at_ms: nowMs }).where(and(eq(slots.run_id, r.run_id), eq(slots.attempt, r.attempt))).run();
    return rows;
  }

  slotCount(): number {
    return this.db.select({ n: count() }).from(slots).get()?.n ?? 0;
  }

  /**
   * At most `max` projects none of whose queued runs may start now (disabled, draining, outside the
   * window, all slots taken): the claim leaves their rows out of its head read, so they never crowd
   * out other work. Each project's verdict is computed again only after its gates or slots changed
   * or its window's next edge passed (scheduler/closed-projects.ts); holds and spending do not enter it, as
   * the budget is checked per run (a continuation already holds its reservation).
   */
  closedProjects(nowMs: number, max: number): string[] {
    return this.closed.list(nowMs, max);
  }

  /** Whether the project was closed at the last closedProjects read, sent or not. */
  isClosed(projectId: string): boolean {
    return this.closed.isClosed(projectId);
  }

  /** A head read listed a run of a closed project beyond the list it sent: the next read leaves it out. */
  crowding(projectId: string): void {
    this.closed.crowding(projectId);
  }

  /** Verdicts the closed-project list computed since this object started. */
  get closedVerdictsComputed(): number {
    return this.closed.computed;
  }

  private closedVerdict(projectId: string, nowMs: number): ClosedVerdict {
    const window = this.read(projectId).window;
    return {
      closed: this.verdicts(projectId, nowMs, true).some((v) => !v.open),
      untilMs: window ? nextWindowEdgeMs(window, nowMs) : Infinity,
    };
  }
}
