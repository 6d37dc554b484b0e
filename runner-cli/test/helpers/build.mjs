// Vitest global setup of the Node project: tests that start `docket-runner` run its build
// (dist/), so the build is brought up to date with src/ once before they run.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RUNNER_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export default function buildRunner() {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', RUNNER_DIR], { stdio: 'inherit' });
}
