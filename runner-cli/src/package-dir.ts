// Where the runner's package lives (its package.json, bin/ and dist/). The same module runs from
// src/ (tests), from dist/runner-cli/src/ (the build) and from an installed tarball, at different
// depths, so the directory is found by walking up to the package.json named docket-runner.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest directory at or above `from` whose package.json is docket-runner's. */
export function findPackageDir(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file) && JSON.parse(readFileSync(file, 'utf8')).name === 'docket-runner') return dir;
    if (dirname(dir) === dir) throw new Error(`no docket-runner package.json above ${from}`);
  }
}

export const PACKAGE_DIR = findPackageDir(dirname(fileURLToPath(import.meta.url)));
