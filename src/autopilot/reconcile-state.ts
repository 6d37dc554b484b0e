// Where each project's reconciliation pass stands, in D1 (autopilot_reconcile, one row per
// project; src/autopilot/reconcile.ts walks it): the phase and cursor, what kind of pass is under
// way, when the last complete pass began (the next "changed" pass reads issues updated since
// then), when the last full pass finished, and why the project is paused, if it is.

import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { autopilotReconcile } from "../db/autopilot-schema";
import type { Headroom } from "./provider";

export type Phase = "ready" | "tracked";
export type PassKind = "full" | "changed";

export interface PassState {
  phase: Phase;
  cursor: string | null;
  passKind: PassKind;
  /** When the pass under way began; null between passes. */
  passStartedAtMs: number | null;
  /** When the last complete pass began: a "changed" pass reads the issues updated since then. */
  sinceMs: number | null;
  passesSinceFull: number;
  fullPassFinishedAtMs: number | null;
  pausedReason: string | null;
}

const FIRST: PassState = {
  phase: "ready",
  cursor: null,
  passKind: "full",
  passStartedAtMs: null,
  sinceMs: null,
  passesSinceFull: 0,
  fullPassFinishedAtMs: null,
  pausedReason: null,
};

export async function readPassState(db: D1Database, id: string): Promise<PassState> {
  const row = await drizzle(db).select().from(autopilotReconcile).where(eq(autopilotReconcile.projectId, id)).get();
  if (!row) return { ...FIRST };
  return {
    phase: row.phase === "tracked" ? "tracked" : "ready",
    cursor: row.cursor,
    passKind: row.passKind === "changed" ? "changed" : "full",
    passStartedAtMs: row.passStartedAtMs,
    sinceMs: row.sinceMs,
    passesSinceFull: row.passesSinceFull,
    fullPassFinishedAtMs: row.fullPassFinishedAtMs,
    pausedReason: row.pausedReason,
  };
}

export async function writePassState(db: D1Database, id: string, state: PassState): Promise<void> {
  const row = { projectId: id, ...state, updatedAtMs: Date.now() };
  await drizzle(db).insert(autopilotReconcile).values(row).onConflictDoUpdate({ target: autopilotReconcile.projectId, set: row });
}

/**
 * The first tick after an outage (src/sweep.ts): every project's pass starts again from its first
 * ready issue, as a full pass, so webhooks lost while Docket was away are found.
 */
export async function restartEveryPass(db: D1Database): Promise<void> {
  await drizzle(db).update(autopilotReconcile).set({ phase: "ready", cursor: null, passKind: "full", passStartedAtMs: Date.now(), updatedAtMs: Date.now() });
}

/**
 * The state of a pass that starts now: a full one when none finished within
 * AUTOPILOT_RECONCILE_FULL_PASS_MS, after AUTOPILOT_RECONCILE_FULL_PASS_EVERY passes, or when
 * asked (an operator's request bypasses nothing); else one over the issues changed since the last
 * complete pass began.
 */
export function startPass(state: PassState, config: Config, forceFull: boolean): PassState {
  const now = Date.now();
  const fullDue =
    forceFull ||
    state.sinceMs === null ||
    state.fullPassFinishedAtMs === null ||
    now - state.fullPassFinishedAtMs >= config.autopilotReconcileFullPassMs ||
    state.passesSinceFull + 1 >= config.autopilotReconcileFullPassEvery;
  return { ...state, phase: "ready", cursor: null, passKind: fullDue ? "full" : "changed", passStartedAtMs: now };
}

/** The state once the pass under way reached its end. */
export function finishPass(state: PassState): PassState {
  const full = state.passKind === "full";
  return {
    ...state,
    phase: "ready",
    cursor: null,
    passStartedAtMs: null,
    sinceMs: state.passStartedAtMs ?? Date.now(),
    passesSinceFull: full ? 0 : state.passesSinceFull + 1,
    fullPassFinishedAtMs: full ? Date.now() : state.fullPassFinishedAtMs,
  };
}

/**
 * Why reconciliation must not spend the installation's last requests now, or null: the remaining
 * budget is under AUTOPILOT_GITHUB_RESERVE and its window has not reset. Webhook admission and
 * publication are not held to the reserve; only reconciliation, the backstop, waits.
 */
export function reserveReason(headroom: Headroom | null, config: Config): string | null {
  if (!headroom || headroom.remaining >= config.autopilotGithubReserve) return null;
  if (headroom.resetAtMs !== 0 && headroom.resetAtMs <= Date.now()) return null;
  const resumes = headroom.resetAtMs === 0 ? "when the limit resets" : `after ${new Date(headroom.resetAtMs).toISOString()}, when the limit resets`;
  return (
    `paused: ${headroom.of ?? "the GitHub installation"} has ${headroom.remaining} of ${headroom.limit} requests left this hour, under the reserve of ` +
    `${config.autopilotGithubReserve} (AUTOPILOT_GITHUB_RESERVE) kept for webhooks and publication; reconciliation resumes ${resumes}`
  );
}

/**
 * Why reconciliation waits for the project's scheduler, or null: while it is disabled or draining
 * every ticket a pass read would be refused ("scheduler disabled", "draining"), so the pass stops
 * where it is, reads nothing, and goes on from there once the scheduler is enabled; the webhook
 * door still records each labelled issue's refusal.
 */
export function schedulerPauseReason(refusal: string | null): string | null {
  if (refusal === null) return null;
  return `paused: the project's scheduler admits nothing new (${refusal}), so reconciliation reads no issue; it resumes when the scheduler is enabled`;
}
