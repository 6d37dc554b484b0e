// The scheduler gates' durable state, kept in the organization's SchedulerObject SQLite because
// that object serializes claims (../shared/DESIGN.md, "Scheduler gates live where claims are
// serialized"). Every method is synchronous: a claim checks a candidate's gates and takes its slot
// in one step, with no await between them, however many claims run at once.

import { ClosedProjects, type ClosedVerdict } from "./scheduler/closed-projects";
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

type GatesRow = {
  project_id: string;
  enabled: number;
  draining: number;
  dispatch_window: string | null;
  concurrency: number | null;
  budget_limit_cents: number | null;
  budget_per_run_cents: number | null;
  budget_spent_cents: number;
  budget_reset_at_ms: number | null;
  updated_at_ms: number;
};

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
    () => this.sql.exec<{ id: string }>("SELECT project_id AS id FROM project_gates UNION SELECT project_id FROM slots").toArray().map((r) => r.id),
    (projectId, nowMs) => this.closedVerdict(projectId, nowMs),
  );

  constructor(
    private readonly sql: SqlStorage,
    private readonly defaultConcurrency: number,
  ) {}

  private row(projectId: string): GatesRow | null {
    return this.sql.exec<GatesRow>("SELECT * FROM project_gates WHERE project_id = ?", projectId).toArray()[0] ?? null;
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
    this.sql.exec(
      `INSERT INTO project_gates (project_id, enabled, draining, dispatch_window, concurrency, budget_limit_cents, budget_per_run_cents,
         budget_spent_cents, budget_reset_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (project_id) DO UPDATE SET enabled = excluded.enabled, draining = excluded.draining, dispatch_window = excluded.dispatch_window,
         concurrency = excluded.concurrency, budget_limit_cents = excluded.budget_limit_cents, budget_per_run_cents = excluded.budget_per_run_cents,
         budget_spent_cents = excluded.budget_spent_cents, budget_reset_at_ms = excluded.budget_reset_at_ms, updated_at_ms = excluded.updated_at_ms`,
      projectId,
      next.enabled ? 1 : 0,
      next.draining ? 1 : 0,
      next.window ? JSON.stringify(next.window) : null,
      next.concurrency,
      next.budget?.limitCents ?? null,
      next.budget?.perRunCents ?? null,
      spent,
      resetAt,
      nowMs,
    );
    this.closed.changed(projectId);
  }

  usage(projectId: string): GateUsage {
    const slots = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM slots WHERE project_id = ?", projectId).one().n;
    const held = this.sql
      .exec<{ c: number }>("SELECT COALESCE(SUM(reserved_cents), 0) AS c FROM budget_holds WHERE project_id = ? AND status IN ('held', 'review')", projectId)
      .one().c;
    return { slotsInUse: slots, heldCents: held, spentCents: this.read(projectId).spentCents };
  }

  verdicts(projectId: string, nowMs: number, holdsBudget = false): GateVerdict[] {
    return gateVerdicts(this.read(projectId), this.usage(projectId), nowMs, this.defaultConcurrency, holdsBudget);
  }

  private holds(runId: string): boolean {
    return this.sql.exec("SELECT 1 FROM budget_holds WHERE run_id = ?", runId).toArray().length > 0;
  }

  /**
   * Checks every gate of the candidate's project and, when all are open, takes its slot and (for a
   * project with a budget, a run that holds none yet) its budget hold, in this one synchronous step.
   */
  admit(orgId: string, candidate: GateCandidate, nowMs: number): Admission {
    const projectId = candidate.project_id;
    if (!projectId) return { ok: true, projectId: null, newHoldCents: null };
    if (this.sql.exec("SELECT 1 FROM slots WHERE run_id = ?", candidate.id).toArray().length > 0) {
      return { ok: false, projectId, gate: "concurrency", reason: "the run already holds a slot" };
    }
    const holdsBudget = this.holds(candidate.id);
    const closed = firstClosed(this.verdicts(projectId, nowMs, holdsBudget));
    if (closed) return { ok: false, projectId, gate: closed.gate, reason: closed.reason };
    this.sql.exec(
      "INSERT INTO slots (run_id, attempt, project_id, org_id, taken_at_ms, checked_at_ms) VALUES (?, ?, ?, ?, ?, ?)",
      candidate.id,
      candidate.attempt,
      projectId,
      orgId,
      nowMs,
      nowMs,
    );
    this.closed.changed(projectId);
    const budget = this.read(projectId).budget;
    if (!budget || holdsBudget) return { ok: true, projectId, newHoldCents: null };
    this.sql.exec(
      "INSERT INTO budget_holds (run_id, project_id, reserved_cents, status, cost_cents, created_at_ms, updated_at_ms) VALUES (?, ?, ?, 'held', NULL, ?, ?)",
      candidate.id,
      projectId,
      budget.perRunCents,
      nowMs,
      nowMs,
    );
    return { ok: true, projectId, newHoldCents: budget.perRunCents };
  }

  /**
   * Gives back the slot of the run's `attempt`, never another attempt's (a release that arrives
   * late leaves the slot taken for the next one); a slot taken before slots had attempts (0) goes
   * with any. Answers whether it held one.
   */
  release(runId: string, attempt: number): boolean {
    const released = this.sql.exec<{ project_id: string }>("DELETE FROM slots WHERE run_id = ? AND attempt IN (?, 0) RETURNING project_id", runId, attempt).toArray();
    for (const slot of released) this.closed.changed(slot.project_id);
    return released.length > 0;
  }

  /** Drops a budget hold that never became a ledger reservation (the claim did not go through). */
  dropHold(runId: string): void {
    this.sql.exec("DELETE FROM budget_holds WHERE run_id = ? AND status = 'held'", runId);
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
    const marks = from.map(() => "?").join(", ");
    const row = this.sql.exec<{ project_id: string }>(`SELECT project_id FROM budget_holds WHERE run_id = ? AND status IN (${marks})`, runId, ...from).toArray()[0];
    if (!row) return false;
    this.sql.exec(`UPDATE budget_holds SET status = ?, cost_cents = ?, updated_at_ms = ? WHERE run_id = ? AND status IN (${marks})`, end.status, end.costCents, nowMs, runId, ...from);
    if (end.status === "settled") {
      this.sql.exec("UPDATE project_gates SET budget_spent_cents = budget_spent_cents + ? WHERE project_id = ?", end.costCents, row.project_id);
    }
    return true;
  }

  slotHolders(projectId: string, limit: number): SlotHolder[] {
    return this.sql.exec<SlotHolder>("SELECT run_id, attempt, taken_at_ms FROM slots WHERE project_id = ? ORDER BY taken_at_ms, run_id LIMIT ?", projectId, limit).toArray();
  }

  /** The slots checked longest ago, for the backstop; each is marked checked now. */
  oldestChecked(limit: number, nowMs: number): SlotRow[] {
    const rows = this.sql.exec<SlotRow>("SELECT run_id, attempt, project_id, org_id, taken_at_ms FROM slots ORDER BY checked_at_ms, run_id LIMIT ?", limit).toArray();
    for (const r of rows) this.sql.exec("UPDATE slots SET checked_at_ms = ? WHERE run_id = ? AND attempt = ?", nowMs, r.run_id, r.attempt);
    return rows;
  }

  slotCount(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM slots").one().n;
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
