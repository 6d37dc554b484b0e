// The shared sweep watermark (../shared/spec/dispatch-lifecycle.md, "A shared sweep watermark
// grants one full staleness window after an outage"). The cron tick records itself in D1; a gap
// longer than the outage threshold marks a recovery, and every run object's reaper then grants
// each run one full staleness window from that moment. Being in D1, every replica sees the same.

import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "./config";
import { sweep } from "./db/schema";
import { log } from "./lib/log";

export async function tickSweep(db: D1Database, config: Config, now: number): Promise<{ recoveredAtMs: number }> {
  // One conditional statement: concurrent ticks agree on whether this one ends an outage.
  const row = await drizzle(db)
    .insert(sweep)
    .values({ id: 1, lastTickAtMs: now, recoveredAtMs: 0 })
    .onConflictDoUpdate({
      target: sweep.id,
      set: {
        recoveredAtMs: sql`CASE WHEN ${now} - ${sweep.lastTickAtMs} > ${config.sweepOutageThresholdMs} THEN ${now} ELSE ${sweep.recoveredAtMs} END`,
        lastTickAtMs: sql`MAX(${sweep.lastTickAtMs}, ${now})`,
      },
    })
    .returning()
    .get();
  if (row.recoveredAtMs === now) log("sweep.recovered", { recovered_at_ms: now, grace_ms: config.daemonSilenceMs });
  return { recoveredAtMs: row.recoveredAtMs };
}
