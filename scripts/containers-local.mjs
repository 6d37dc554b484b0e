// Managed runners on this machine's Docker engine, for `npm start` and the containers tests:
// scripts/containers-engine.sh prepares the engine and images and says which environment wrangler
// and Miniflare need (WRANGLER_DOCKER_BIN, MINIFLARE_CONTAINER_EGRESS_IMAGE); cleanContainers()
// removes the containers and egress sidecars workerd leaves behind when it stops.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "containers-engine.sh");
/** Preparing may build the two images from scratch: a few minutes at most. */
const PREPARE_TIMEOUT_MS = 600_000;

/**
 * Prepares the engine and images without installing anything. `ok` with the environment to run
 * wrangler or Miniflare with, or not `ok` with the reason in one line.
 * @returns {{ ok: true, env: Record<string, string> } | { ok: false, why: string }}
 */
export function prepareContainers() {
  const r = spawnSync(SCRIPT, ["--no-install"], { encoding: "utf8", timeout: PREPARE_TIMEOUT_MS });
  if (r.status !== 0) return { ok: false, why: (r.stderr || String(r.error ?? `exit ${r.status}`)).trim().split("\n").pop() ?? "" };
  const env = Object.fromEntries(r.stdout.trim().split("\n").map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]));
  return { ok: true, env };
}

/**
 * Removes the containers workerd left whose names start with `prefix` (workerd names them
 * workerd-<worker and class>-<id>), so a run removes its own and not another's on the same engine.
 * @param {string} prefix
 */
export function cleanContainers(prefix) {
  spawnSync(SCRIPT, ["--clean", prefix], { stdio: "inherit" });
}
