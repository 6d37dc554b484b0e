// The job directories past the log retention, removed a batch at a time (runner-cli/README.md, "Logs").
import { rmSync } from 'node:fs';
import { errorText } from './api.js';
import type { JobDb } from './jobs.js';
import { formatDuration, type Output } from './output.js';

/** Job directories past the log retention removed in one pass. */
const LOG_PRUNE_BATCH = 100;

/**
 * Removes the files of jobs that ended more than `log_retention_ms` ago (their sandbox.log and
 * the daemon's state files; the job's row stays for `status`), at most LOG_PRUNE_BATCH per pass.
 */
export function pruneLogs(db: JobDb, out: Output, retentionMs: number) {
  const beforeMs = Date.now() - retentionMs;
  const rows = db.expiredJobDirs(beforeMs, LOG_PRUNE_BATCH);
  for (const row of rows) {
    try {
      rmSync(row.job_dir!, { recursive: true, force: true });
      db.update(row.run_id, row.attempt, { job_dir: null, work_dir: null });
    } catch (e) {
      out.run('prune_failed', { run_id: row.run_id, attempt: row.attempt }, `could not remove ${row.job_dir}: ${errorText(e)}`, { error: errorText(e) });
    }
  }
  if (rows.length > 0) out.emit('logs_pruned', `removed the files of ${rows.length} job(s) that ended over ${formatDuration(retentionMs)} ago`, { jobs: rows.length });
}
