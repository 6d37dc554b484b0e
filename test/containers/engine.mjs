// Vitest global setup of the containers project: the Docker engine and the two images a managed
// runner needs (scripts/containers-local.mjs), provided to the tests as `containersEngine`; the
// containers workerd leaves are removed at the end. Where no engine can start, the tests skip and
// say why in one line.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanContainers, prepareContainers } from '../../scripts/containers-local.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** @param {{ provide: (key: string, value: unknown) => void }} project */
export default function containersEngine(project) {
  // The image holds the runner's build: bring it up to date with src/ first.
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'runner-cli')], { stdio: 'inherit' });
  const prepared = prepareContainers();
  project.provide('containersEngine', { ok: prepared.ok, why: prepared.ok ? '' : prepared.why });
  return () => {
    // The pool names this project's Worker after it (wrangler.toml's name is docket for npm start's).
    if (prepared.ok) cleanContainers('workerd-vitest-pool-workers-runner-containers-');
  };
}
