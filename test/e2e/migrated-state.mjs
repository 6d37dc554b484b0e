// The local D1 of a fresh Docket, its migrations applied. `wrangler d1 migrations apply --local` is
// a Node process of its own and about 10 s of CPU, once per local Docket a test starts. The Node
// project's global setup (vitest.config.ts) applies them once to a template, and every local Docket
// of that run starts from a copy; outside a test run (`npm run test:restart`, `npm run test:pack`)
// each applies them itself.
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyLocalMigrations } from '../../scripts/local-migrations.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The installed wrangler's CLI, and the environment that keeps it off the network (test/e2e/plane-process.mjs too). */
export const WRANGLER = join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js');
export const QUIET_ENV = { CI: 'true', WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' };
/** Where the global setup put the template: test files inherit it with the environment. */
const TEMPLATE_ENV = 'DOCKET_TEST_MIGRATED_STATE';

/** Applies the D1 migrations to the persist directory `persist`. @param {string} persist */
export function applyMigrations(persist) {
  const r = applyLocalMigrations({ persist, env: { ...process.env, ...QUIET_ENV } });
  if (!r.ok) throw new Error(`migrations failed (${r.attempt} runs): ${r.stdout}\n${r.stderr}`);
}

/** A fresh persist directory `persist` with the migrations applied: the template's copy, when there is one. @param {string} persist */
export function migratedState(persist) {
  const template = process.env[TEMPLATE_ENV];
  if (template && existsSync(template)) cpSync(template, persist, { recursive: true });
  else applyMigrations(persist);
}

/** Vitest global setup: the template, removed after the run. */
export default function setup() {
  const template = mkdtempSync(join(tmpdir(), 'docket-migrated-'));
  applyMigrations(template);
  process.env[TEMPLATE_ENV] = template;
  return () => rmSync(template, { recursive: true, force: true });
}
