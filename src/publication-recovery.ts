// Recovery of pending publications after an outage or a deploy (../shared/spec/run-lifecycle.md,
// "Completion and recovery": "reconcile unfinished runs before dispatch ... any pending PR
// publication"). Each cron tick, first after the sweep, asks a bounded batch of publishing runs and
// queued continuations (PUBLICATION_RECOVERY_BATCH) to reconcile (RunObject.reconcilePublication);
// on a tick of a recovery under way, the runs its pass already reconciled are not asked again.

import { and, asc, eq, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "./config";
import { runs } from "./db/schema";
import type { Env } from "./env";
import { log, logRun } from "./lib/log";

export async function recoverPublications(env: Env, config: Config, graceFromMs: number, recoveryEpochMs = 0): Promise<{ checked: number; failed: number }> {
  if (config.publicationRecoveryBatch === 0) return { checked: 0, failed: 0 };
  // A queued continuation has order group 0 (src/run/projection.ts); the run object tells which kind it is.
  const results = await drizzle(env.DB)
    .select({ id: runs.id, attempt: runs.attempt })
    .from(runs)
    .where(or(eq(runs.state, "publishing"), and(eq(runs.state, "queued"), eq(runs.orderGroup, 0))))
    .orderBy(asc(runs.updatedAtMs))
    .limit(config.publicationRecoveryBatch);
  let failed = 0;
  for (const row of results) {
    try {
      const answer = await env.RUN.get(env.RUN.idFromName(row.id)).reconcilePublication(graceFromMs, recoveryEpochMs);
      if (answer.publication !== "none") logRun("publication.reconciled", { run: row.id, attempt: row.attempt, state: answer.state, reason: answer.publication });
    } catch (err) {
      failed += 1;
      logRun("publication.reconcile_failed", { run: row.id, attempt: row.attempt, reason: String(err) });
    }
  }
  if (results.length > 0) log("publication.recovery", { checked: results.length, failed, reason: "cron publication recovery" });
  return { checked: results.length, failed };
}
