// `wrangler d1 migrations apply --local`, as `npm start`, the tests and the benchmarks run it.
// Wrangler's local D1 starts a runtime of its own for each statement batch, and one of those can
// fail by itself on a loaded machine, without an error of the migrations' own. Applying is
// idempotent (wrangler records each migration it applied), so a failed run is tried again, up to
// `attempts` runs in all.

import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const WRANGLER = createRequire(import.meta.url).resolve("wrangler/bin/wrangler.js");
/** Docket's own config, at the repository root. */
const DOCKET_CONFIG = join(dirname(fileURLToPath(import.meta.url)), "..", "wrangler.toml");

/**
 * Applies the D1 migrations of the database bound as DB in `config` (Docket's wrangler.toml unless
 * given) to the local state under `persist` (relative to the working directory).
 * Answers whether the last run succeeded, the migrations applied over every run (a failed one may
 * have applied some), and the last run's exit and output. A run that takes longer than `timeoutMs` is
 * stopped and counts as failed (`timedOut`).
 * @param {{ persist: string, config?: string, attempts?: number, timeoutMs?: number, env?: Record<string, string | undefined>, onRetry?: (failed: { attempt: number, status: number | null, signal: string | null, timedOut: boolean, stdout: string, stderr: string }) => void }} o
 */
export function applyLocalMigrations({ persist, config = DOCKET_CONFIG, attempts = 2, timeoutMs = 120_000, env = process.env, onRetry }) {
  const args = [WRANGLER, "d1", "migrations", "apply", "DB", "--local", "--config", config, "--persist-to", resolve(persist)];
  /** @type {Set<string>} */
  const applied = new Set();
  for (let attempt = 1; ; attempt++) {
    const run = spawnSync(process.execPath, args, {
      cwd: dirname(config),
      encoding: "utf8",
      env: { ...env, CI: "true" },
      timeout: timeoutMs,
    });
    // Wrangler names every migration it is about to apply, and again as it applies it.
    for (const name of run.stdout?.match(/\b\d{4}_[\w-]+\.sql\b/g) ?? []) applied.add(name);
    const result = { ok: run.status === 0, attempt, applied: [...applied].sort(), status: run.status, signal: run.signal, timedOut: /** @type {NodeJS.ErrnoException | undefined} */ (run.error)?.code === "ETIMEDOUT", stdout: run.stdout ?? "", stderr: run.stderr ?? "" };
    if (result.ok || attempt >= attempts) return result;
    onRetry?.(result);
  }
}
