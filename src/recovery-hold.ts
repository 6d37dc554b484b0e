// Whether a recovery holds dispatch (../shared/spec/run-lifecycle.md, "Completion and recovery":
// "After a restart, reconcile unfinished runs before dispatch"). Read from the sweep row by a claim's
// scheduler and by a run's answer to why it waits; the pass that ends the hold is src/recovery.ts.

import type { Config } from "./config";
import { sweep } from "./db/schema";
import { outageMayBeOngoing } from "./sweep";

/** The sweep row: a claim's scheduler reads it (durable-objects/claim-credentials.ts), a run answer and GET /v1/queue with RECOVERY_ROW_SQL. */
export interface RecoveryRow {
  last_tick_at_ms: number;
  recovered_at_ms: number;
  recovery_done_at_ms: number;
}

/** RecoveryRow as a drizzle selection of the sweep row (src/db/schema.ts, `sweep`). */
export const RECOVERY_ROW = { last_tick_at_ms: sweep.lastTickAtMs, recovered_at_ms: sweep.recoveredAtMs, recovery_done_at_ms: sweep.recoveryDoneAtMs };

/** The same read as SQL text, for the claim's counted batch (durable-objects/claim-credentials.ts). */
export const RECOVERY_ROW_SQL = "SELECT last_tick_at_ms, recovered_at_ms, recovery_done_at_ms FROM sweep WHERE id = 1";

/**
 * Why a claim must wait, or null. A plane that never ticked has nothing to recover. A last tick
 * older than the outage threshold means an outage may just have ended and no tick has started its
 * recovery yet; a recovery whose pass has not finished holds dispatch for at most RECOVERY_HOLD_MAX_MS.
 */
export function recoveryHold(row: RecoveryRow | null | undefined, nowMs: number, config: Config): string | null {
  if (!row) return null;
  if (outageMayBeOngoing(row.last_tick_at_ms, nowMs, config.sweepOutageThresholdMs)) {
    return `no cron tick for ${Math.round((nowMs - row.last_tick_at_ms) / 1_000)} s: an outage may just have ended, and unfinished runs are reconciled before anything is dispatched`;
  }
  if (row.recovered_at_ms > row.recovery_done_at_ms && nowMs - row.recovered_at_ms < config.recoveryHoldMaxMs) {
    return `unfinished runs are being reconciled after an outage or a deploy (since ${new Date(row.recovered_at_ms).toISOString()}) before anything is dispatched`;
  }
  return null;
}
