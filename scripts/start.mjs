#!/usr/bin/env node
// `npm start`: Docket locally with everything embedded (the Workers runtime, D1, Durable Objects
// and Queues, all local under .wrangler/state, or PERSIST_TO), migrations applied, and, once the
// Worker answers, a note on how to get a token.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { helpOrRefuse } from "./cli-args.mjs";
import { cleanContainers, prepareContainers } from "./containers-local.mjs";
import { applyLocalMigrations } from "./local-migrations.mjs";
import { relayWranglerOutput, tolerateClosedReader } from "./wrangler-output.mjs";

helpOrRefuse("npm start", () => `npm start: Docket locally with everything embedded: the Workers runtime, D1, Durable Objects
and Queues, all local. It applies the D1 migrations, starts the Worker, ticks its cron, and once
the Worker answers prints the operator secret and the first commands to run. Ctrl-C stops it.

Environment:
  PORT                  8787            the port on 127.0.0.1
  PERSIST_TO            .wrangler/state the local state directory (database, objects, queues)
  ADMIN_SECRET          a random one    the operator secret, printed at start
  AUTOPILOT_SECRET_KEY  kept with the state
                                        the key autopilot secrets are encrypted under
  CRON_TICK_MS          60000           how often the Worker's cron tick runs (first at start)
  START_TIMEOUT_MS      120000          the longest wait for the Worker to answer
  MIGRATE_ATTEMPTS      2               how many times a failed D1 migration run is tried
  MIGRATE_TIMEOUT_MS    120000          the longest one D1 migration run may take
  OUTBOUND_ALLOW_LOOPBACK
                        true            whether callbacks and GitHub requests may go to loopback
                                        (a receiver or a GitHub stand-in on this machine); a
                                        deployment refuses loopback unless it sets this

Managed runners (README.md, "Managed runners") run in containers on this machine's Docker engine
when one answers (scripts/containers-engine.sh); without one they are off and everything else runs.

Docket's own timings and limits (README.md, "Configuration") are Worker variables: set them for
a local run in .dev.vars at the repository root, one NAME=value per line.`);

const port = process.env.PORT ?? "8787";
const base = `http://127.0.0.1:${port}`;
const persistTo = process.env.PERSIST_TO || ".wrangler/state";
const adminSecret = process.env.ADMIN_SECRET ?? `local-${randomBytes(12).toString("hex")}`;
// Autopilot projects' secrets are encrypted under this key. Another key would make the stored ones
// unreadable, so the local one is kept with the local database.
const autopilotSecretKey =
  process.env.AUTOPILOT_SECRET_KEY ?? localSecretKey(process.env.PERSIST_TO ? join(persistTo, "autopilot-secret-key") : ".wrangler/autopilot-secret-key");
const cronEveryMs = positiveWhole("CRON_TICK_MS", 60_000, "milliseconds");
const readyTimeoutMs = positiveWhole("START_TIMEOUT_MS", 120_000, "milliseconds");
const migrateAttempts = positiveWhole("MIGRATE_ATTEMPTS", 2, "attempts");
const migrateTimeoutMs = positiveWhole("MIGRATE_TIMEOUT_MS", 120_000, "milliseconds");
// A local run talks to receivers and stand-ins on this machine (README.md, "Configuration").
const allowLoopback = process.env.OUTBOUND_ALLOW_LOOPBACK || "true";

function positiveWhole(name, fallback, unit) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) {
    console.error(`${name} must be a whole number of ${unit} above 0, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return n;
}

function localSecretKey(path) {
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  const key = randomBytes(32).toString("hex");
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${key}\n`, { mode: 0o600 });
  return key;
}
// One process operates one local state (../shared/spec/run-lifecycle.md, "Completion and recovery":
// a second process must refuse to operate the same runtime store): a second `npm start` on it would
// take the first one's live runs for an outage's and recover them. The lock names its holder's pid;
// a lock whose holder is gone (kill -9) is taken over.
const lockFile = join(persistTo, "docket-start.lock");
const holder = lockHolder(lockFile);
if (holder !== null) {
  console.error(`Another \`npm start\` (pid ${holder}) operates the local state in ${persistTo}; stop it first, or set PERSIST_TO to another directory.`);
  process.exit(1);
}
mkdirSync(persistTo, { recursive: true });
writeFileSync(lockFile, `${process.pid}\n`);
process.on("exit", () => {
  if (lockHolder(lockFile) === process.pid) rmSync(lockFile, { force: true });
});

// A port another server holds would answer the readiness check and take the cron ticks instead of
// this Worker: refused before anything starts.
if (!(await portFree(Number(port)))) {
  console.error(`Port ${port} on 127.0.0.1 is in use (another Docket, or another program); stop it, or set PORT to another port.`);
  process.exit(1);
}

/** The pid holding the state's lock, when that process is alive; null when there is no lock or its holder is gone. */
function lockHolder(path) {
  if (!existsSync(path)) return null;
  const pid = Number(readFileSync(path, "utf8").trim());
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (e) {
    return e.code === "EPERM" ? pid : null;
  }
}

/** Whether nothing listens on 127.0.0.1:port. */
function portFree(portNumber) {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(portNumber, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

// Wrangler runs as a direct child, so a SIGTERM to this process reaches it (npm exec would keep it).
const wrangler = [createRequire(import.meta.url).resolve("wrangler/bin/wrangler.js")];
process.env.WRANGLER_SEND_METRICS ??= "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";

// Wrangler prints a table of every migration after each one it applies: its output is shown only
// when the migrations fail, and a line names what was applied. A failed run is tried again
// (scripts/local-migrations.mjs).
console.log(`Applying D1 migrations to the local database in ${persistTo}…`);
const failedRun = (/** @type {{ attempt: number, status: number | null, signal: string | null, timedOut: boolean, stdout: string, stderr: string }} */ run, then) => {
  process.stdout.write(run.stdout);
  process.stderr.write(run.stderr);
  const how = run.timedOut ? `stopped after MIGRATE_TIMEOUT_MS=${migrateTimeoutMs}` : `exit ${run.status ?? run.signal}`;
  console.error(`The D1 migrations failed (${how}, attempt ${run.attempt} of ${migrateAttempts}); ${then}`);
};
const migrated = applyLocalMigrations({ persist: persistTo, attempts: migrateAttempts, timeoutMs: migrateTimeoutMs, onRetry: (run) => failedRun(run, "applying them again…") });
if (!migrated.ok) {
  failedRun(migrated, "Docket was not started.");
  process.exit(migrated.status ?? 1);
}
const { applied } = migrated;
console.log(applied.length === 0 ? "  The local database is up to date." : `  Applied ${applied.length}: ${applied[0]} … ${applied[applied.length - 1]}.`);
// Managed runners' containers need a Docker engine and their images; without them the rest runs.
const containers = prepareContainers();
if (containers.ok) Object.assign(process.env, containers.env);
else console.log(`Managed runners are off: no Docker engine for their containers (${containers.why}).`);
console.log(`Starting the Worker at ${base}…\n`);

const dev = spawn(
  process.execPath,
  [
    ...wrangler, "dev", "--local", "--ip", "127.0.0.1", "--port", port, "--persist-to", persistTo,
    "--var", `ADMIN_SECRET:${adminSecret}`, "--var", `AUTOPILOT_SECRET_KEY:${autopilotSecretKey}`,
    "--var", `OUTBOUND_ALLOW_LOOPBACK:${allowLoopback}`, "--test-scheduled", `--enable-containers=${containers.ok}`,
  ],
  // Its output comes through this process (scripts/wrangler-output.mjs): without the bindings
  // table, and never into a pipe its reader closed.
  { stdio: ["inherit", "pipe", "pipe"] },
);
tolerateClosedReader(process.stdout);
tolerateClosedReader(process.stderr);
relayWranglerOutput(dev.stdout, process.stdout);
relayWranglerOutput(dev.stderr, process.stderr);
let running = true;
dev.on("exit", (code, signal) => {
  running = false;
  clearInterval(cron);
  // workerd leaves each container and its egress sidecar behind.
  if (containers.ok) cleanContainers("workerd-docket-");
  process.exit(code ?? (signal ? 1 : 0));
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => dev.kill(signal));

// Cron triggers do not fire under `wrangler dev`: tick the Worker's cron here, as the deployed
// `[triggers] crons` would (the sweep watermark, the alarm backstop, reconciliation, retention).
const tick = () => fetch(`${base}/__scheduled?cron=*+*+*+*+*`).catch(() => undefined);
const cron = setInterval(tick, cronEveryMs);

// The note comes once the Worker answers, after wrangler's own start-up lines, so it is the last
// thing on the screen.
const deadline = Date.now() + readyTimeoutMs;
let ready = false;
while (running && !ready && Date.now() < deadline) {
  ready = await answers(`${base}/healthz`, deadline);
  if (!ready) await new Promise((resolve) => setTimeout(resolve, 250));
}
if (running && !ready) {
  console.error(`\nDocket did not answer at ${base}/healthz within ${readyTimeoutMs / 1000} s (START_TIMEOUT_MS); see wrangler's output above.`);
  dev.kill("SIGTERM");
}
if (ready) {
  // The first tick comes at once: a start on a state left for longer than SWEEP_OUTAGE_THRESHOLD_MS
  // is an outage just ended, and its recovery (src/recovery.ts) holds dispatch until a tick starts it.
  await tick();
  console.log(`
Docket is running at ${base}

  Operator secret (ADMIN_SECRET): ${adminSecret}

  1. Create an organization and its first admin token (the answer's token.token, shown once):
    curl -s -X POST ${base}/v1/orgs \\
      -H 'Authorization: Bearer ${adminSecret}' -H 'Content-Type: application/json' \\
      -d '{"name": "my-team"}'

  2. Mint a runner registration token with that admin token (the answer's token):
    curl -s -X POST ${base}/v1/tokens \\
      -H 'Authorization: Bearer <admin token>' -H 'Content-Type: application/json' \\
      -d '{"kind": "registration"}'

  3. Register a runner with it and let it listen (runner-cli/README.md):
    node runner-cli/bin/docket-runner.mjs register --server ${base} --token <registration token>
    node runner-cli/bin/docket-runner.mjs listen

  4. In another terminal, dispatch a first run with the admin token (the answer's id); the runner takes it:
    curl -s -X POST ${base}/v1/runs \\
      -H 'Authorization: Bearer <admin token>' -H 'Content-Type: application/json' \\
      -H 'Idempotency-Key: first-run' \\
      -d '{"brief": "say hello", "launch": {"command": ["sh", "-c", "echo hello"]}}'

  5. Read what it did: its state, then its events (the agent's output among them):
    curl -s ${base}/v1/runs/<run id> -H 'Authorization: Bearer <admin token>'
    curl -s ${base}/v1/runs/<run id>/events -H 'Authorization: Bearer <admin token>'

  The operator's dashboard is at ${base}/dash: sign in with a member token.${containers.ok ? `
  Managed runners are on (this machine's Docker engine): instead of steps 2 and 3, an admin creates a
  pool at ${base}/dash/managed, and its container takes the run from the next cron tick.` : ""}
  The API reference is at ${base}/docs; docs/protocol.md explains it.
  The cron tick ran at start and runs every ${cronEveryMs / 1000} s (CRON_TICK_MS). Stop with Ctrl-C.
  Callbacks and GitHub requests ${allowLoopback === "true" ? "may" : "may not"} go to loopback (OUTBOUND_ALLOW_LOOPBACK=${allowLoopback}; a deployment refuses it by default).
`);
}

/**
 * Whether `url` answers 200 before `deadlineMs`. The first request waits while the Worker builds
 * and starts (seconds on a loaded machine): it is given until the deadline, not cut off and sent
 * again, since each one cut off leaves the runtime an answer to write to a closed connection.
 */
async function answers(url, deadlineMs) {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(Math.max(1, deadlineMs - Date.now())) })).ok;
  } catch {
    return false;
  }
}
