// The cron's backstop for run alarms. A run object arms its alarm with every commit; a run whose
// alarm was lost anyway (an object written before that rule, a storage fault) would wait in a held
// state forever. Each tick asks a bounded batch of unfinished runs, unchanged for a while, to
// finish their pending side effects and arm their alarm (RunObject.ensureAlarm; docs/runbook.md).

import { and, asc, eq, gte, lt } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "./config";
import { runs } from "./db/schema";
import type { Env } from "./env";
import { randomHex } from "./lib/crypto";
import { log, logRun } from "./lib/log";
import { RUN_STATES, isTerminal } from "./run/states";

const UNFINISHED = RUN_STATES.filter((state) => !isTerminal(state));

interface Row {
  id: string;
  version: number;
  attempt: number;
}

export async function checkRunAlarms(
  env: Env,
  config: Config,
  nowMs: number,
  graceFromMs: number,
): Promise<{ checked: number; rearmed: number; failed: number }> {
  const rows = await pickUnfinished(env.DB, config, nowMs);
  let rearmed = 0;
  let failed = 0;
  for (const row of rows) {
    try {
      const answer = await env.RUN.get(env.RUN.idFromName(row.id)).ensureAlarm(row.version, graceFromMs);
      if (answer.rearmed) rearmed += 1;
    } catch (err) {
      failed += 1;
      logRun("backstop.failed", { run: row.id, attempt: row.attempt, reason: String(err) });
    }
  }
  if (rows.length > 0) log("backstop.checked", { checked: rows.length, rearmed, failed, reason: "cron alarm backstop" });
  return { checked: rows.length, rearmed, failed };
}

/**
 * Up to ALARM_BACKSTOP_BATCH unfinished runs unchanged for ALARM_BACKSTOP_AGE_MS, in id order from a
 * random point, wrapping around: successive ticks cover them all without keeping a cursor, and a
 * few long-lived runs cannot hide the rest. Each read is one state's slice of the runs_unfinished index.
 */
async function pickUnfinished(db: D1Database, config: Config, nowMs: number): Promise<Row[]> {
  const limit = config.alarmBackstopBatch;
  if (limit === 0) return [];
  const start = `run_${randomHex(12)}`;
  const cutoff = nowMs - config.alarmBackstopAgeMs;
  const orm = drizzle(db);
  const slice = (side: typeof gte | typeof lt) =>
    UNFINISHED.map((state) =>
      orm
        .select({ id: runs.id, version: runs.version, attempt: runs.attempt })
        .from(runs)
        .where(and(eq(runs.state, state), side(runs.id, start), lt(runs.updatedAtMs, cutoff)))
        .orderBy(asc(runs.id))
        .limit(limit),
    );
  const [first, ...rest] = [...slice(gte), ...slice(lt)];
  const results = await orm.batch([first, ...rest]);
  const byId = (a: Row, b: Row) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const after = results.slice(0, UNFINISHED.length).flat().sort(byId);
  const before = results.slice(UNFINISHED.length).flat().sort(byId);
  return [...after, ...before].slice(0, limit);
}
