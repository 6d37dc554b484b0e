#!/usr/bin/env node
// `npm start`: Docket locally with everything embedded (the Workers runtime, D1, Durable Objects
// and Queues, all local under .wrangler/), migrations applied, and a note on how to get a token.

import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { createRequire } from "node:module";

const port = process.env.PORT ?? "8787";
const adminSecret = process.env.ADMIN_SECRET ?? `local-${randomBytes(12).toString("hex")}`;
// Autopilot projects' secrets are encrypted under this key. Another key would make the stored ones
// unreadable, so the local one is kept with the local database under .wrangler/.
const autopilotSecretKey = process.env.AUTOPILOT_SECRET_KEY ?? localSecretKey(".wrangler/autopilot-secret-key");

function localSecretKey(path) {
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  const key = randomBytes(32).toString("hex");
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${key}\n`, { mode: 0o600 });
  return key;
}
// Wrangler runs as a direct child, so a SIGTERM to this process reaches it (npm exec would keep it).
const wrangler = [createRequire(import.meta.url).resolve("wrangler/bin/wrangler.js")];
process.env.WRANGLER_SEND_METRICS ??= "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";

console.log("Applying D1 migrations to the local database…");
const migrate = spawnSync(process.execPath, [...wrangler, "d1", "migrations", "apply", "DB", "--local"], {
  stdio: "inherit",
  env: { ...process.env, CI: "true" },
});
if (migrate.status !== 0) process.exit(migrate.status ?? 1);

console.log(`
Docket is starting at http://127.0.0.1:${port}

  Operator secret (ADMIN_SECRET): ${adminSecret}

  Create an organization and its first admin token:
    curl -s -X POST http://127.0.0.1:${port}/v1/orgs \\
      -H 'Authorization: Bearer ${adminSecret}' -H 'Content-Type: application/json' \\
      -d '{"name": "my-team"}'

  Then mint a runner registration token with that admin token:
    curl -s -X POST http://127.0.0.1:${port}/v1/tokens \\
      -H 'Authorization: Bearer <admin token>' -H 'Content-Type: application/json' \\
      -d '{"kind": "registration"}'

  The operator's dashboard is at http://127.0.0.1:${port}/dash: sign in with a member token.

  The cron tick runs every ${Number(process.env.CRON_TICK_MS ?? 60_000) / 1000} s (CRON_TICK_MS).
  The API is described in docs/protocol.md. Stop with Ctrl-C.
`);

const dev = spawn(
  process.execPath,
  [...wrangler, "dev", "--local", "--ip", "127.0.0.1", "--port", port, "--var", `ADMIN_SECRET:${adminSecret}`, "--var", `AUTOPILOT_SECRET_KEY:${autopilotSecretKey}`, "--test-scheduled"],
  { stdio: "inherit" },
);

// Cron triggers do not fire under `wrangler dev`: tick the Worker's cron here, as the deployed
// `[triggers] crons` would (the sweep watermark, the alarm backstop, reconciliation, retention).
const cronEveryMs = Number(process.env.CRON_TICK_MS ?? 60_000);
const cron = setInterval(() => {
  fetch(`http://127.0.0.1:${port}/__scheduled?cron=*+*+*+*+*`).catch(() => undefined);
}, cronEveryMs);
dev.on("exit", () => clearInterval(cron));
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => dev.kill(signal));
dev.on("exit", (code) => process.exit(code ?? 0));
