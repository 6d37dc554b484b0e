// The shared sweep watermark (../shared/spec/dispatch-lifecycle.md, "A shared sweep watermark
// grants one full staleness window after an outage"). The cron tick records itself in D1; a gap
// longer than the outage threshold marks a recovery, and every run object's reaper then grants
// each run one full staleness window from that moment. Being in D1, every replica sees the same.
// Until a tick has recorded the recovery, a last tick older than the threshold (or a watermark
// that cannot be read) counts as an outage still going on (reaperGraceFromMs).

import { eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "./config";
import { sweep } from "./db/schema";
import { log } from "./lib/log";

/**
 * Records this tick. A gap longer than the outage threshold, or a Worker version other than the one
 * that ticked last (a deploy), starts a recovery: recovered_at_ms becomes now and the recovery's
 * pass over unfinished runs starts again from its beginning (src/recovery.ts).
 */
export async function tickSweep(db: D1Database, config: Config, now: number, versionId: string | null = null): Promise<{ recoveredAtMs: number }> {
  const startsRecovery = sql`(${now} - ${sweep.lastTickAtMs} > ${config.sweepOutageThresholdMs} OR (${versionId} IS NOT NULL AND ${sweep.versionId} IS NOT NULL AND ${sweep.versionId} != ${versionId}))`;
  // One conditional statement: concurrent ticks agree on whether this one starts a recovery.
  const row = await drizzle(db)
    .insert(sweep)
    .values({ id: 1, lastTickAtMs: now, recoveredAtMs: 0, versionId })
    .onConflictDoUpdate({
      target: sweep.id,
      set: {
        recoveredAtMs: sql`CASE WHEN ${startsRecovery} THEN ${now} ELSE ${sweep.recoveredAtMs} END`,
        recoveryCursor: sql`CASE WHEN ${startsRecovery} THEN NULL ELSE ${sweep.recoveryCursor} END`,
        lastTickAtMs: sql`MAX(${sweep.lastTickAtMs}, ${now})`,
        versionId: sql`COALESCE(${versionId}, ${sweep.versionId})`,
      },
    })
    .returning()
    .get();
  if (row.recoveredAtMs === now) log("sweep.recovered", { recovered_at_ms: now, grace_ms: config.daemonSilenceMs, reason: "the first cron tick after an outage or a deploy: the reaper grants the staleness window from now, and unfinished runs are reconciled before dispatch" });
  return { recoveredAtMs: row.recoveredAtMs };
}

/** The watermark row as the reaper reads it; null when the cron never ticked on this deployment. */
export interface Watermark {
  lastTickAtMs: number;
  recoveredAtMs: number;
}

/** The last tick and the last recovery, in one read (a reaper needs both to judge an outage). */
export async function readWatermark(db: D1Database): Promise<Watermark | null> {
  const row = await drizzle(db)
    .select({ lastTickAtMs: sweep.lastTickAtMs, recoveredAtMs: sweep.recoveredAtMs })
    .from(sweep)
    .where(eq(sweep.id, 1))
    .get();
  return row ?? null;
}

/** No cron tick for longer than the outage threshold: an outage may be under way, or just over. */
export function outageMayBeOngoing(lastTickAtMs: number, nowMs: number, outageThresholdMs: number): boolean {
  return nowMs - lastTickAtMs > outageThresholdMs;
}

/**
 * When the reaper's staleness window starts for an alarm firing at `nowMs` (the `recoveredAtMs` of
 * a deadline command). The recorded recovery, unless the plane may be inside an outage or just out
 * of one that no tick has recorded yet: the watermark could not be read (`"unavailable"`), or the
 * last tick is itself older than the outage threshold (alarms fire the moment the Worker is back,
 * before the first tick). Then nobody is reaped on a guess: the window starts now.
 */
export function reaperGraceFromMs(watermark: Watermark | null | "unavailable", nowMs: number, outageThresholdMs: number): number {
  if (watermark === "unavailable") return nowMs;
  if (watermark === null) return 0;
  if (outageMayBeOngoing(watermark.lastTickAtMs, nowMs, outageThresholdMs)) return nowMs;
  return watermark.recoveredAtMs;
}
