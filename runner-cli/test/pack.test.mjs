// The distributable runner: `npm pack -w runner-cli` gives the tarball a deployment hands out.
// It carries the build and the bin, not the TypeScript sources or the tests.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const RUNNER_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = join(RUNNER_DIR, '..');
const dest = mkdtempSync(join(tmpdir(), 'docket-pack-'));

afterAll(() => rmSync(dest, { recursive: true, force: true }));

describe('npm pack -w runner-cli', () => {
  it('gives docket-runner-<version>.tgz with dist/ (the CLI and the compiled contract) and the bin, without sources or tests', () => {
    // dist/ is fresh (the Node project's global setup builds it), so pack skips its prepare step.
    const out = execFileSync('npm', ['pack', '--pack-destination', dest, '-w', 'runner-cli', '--json', '--ignore-scripts'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    const [pack] = JSON.parse(out);
    const { version } = JSON.parse(readFileSync(join(RUNNER_DIR, 'package.json'), 'utf8'));
    expect(pack.filename).toBe(`docket-runner-${version}.tgz`);
    expect(existsSync(join(dest, pack.filename))).toBe(true);

    const files = pack.files.map((f) => f.path).sort();
    expect(files).toEqual(expect.arrayContaining([
      'README.md', 'package.json', 'bin/docket-runner.mjs',
      'dist/runner-cli/src/cli.js', 'dist/runner-cli/src/daemon.js', 'dist/runner-cli/src/launchers/process.js',
      // The contract the client decodes answers with, compiled from the server's src/protocol/.
      'dist/src/protocol/index.js', 'dist/src/protocol/runners.js', 'dist/src/lib/backoff.js',
    ]));
    expect(files.filter((f) => f.startsWith('src/') || f.startsWith('test/') || f.endsWith('.ts') || f === 'tsconfig.json')).toEqual([]);
    // Every module of the build is in it: the tarball runs without a TypeScript step.
    const built = files.filter((f) => f.startsWith('dist/'));
    expect(built.every((f) => f.endsWith('.js'))).toBe(true);
    expect(built.length).toBeGreaterThanOrEqual(10);
  });

  it('the README\'s pack command writes runner-cli/docket-runner-<version>.tgz, as it says, and leaves nothing untracked', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const line = readme.split('\n').find((l) => l.includes('npm pack -w runner-cli'));
    const [command, says] = line.replace(/^npm ci && /, '').split('#');
    expect(says).toContain('runner-cli/docket-runner-<version>.tgz');
    const { version } = JSON.parse(readFileSync(join(RUNNER_DIR, 'package.json'), 'utf8'));
    const tarball = join(RUNNER_DIR, `docket-runner-${version}.tgz`);
    const untracked = () => execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter((l) => l.endsWith('.tgz'));
    const before = untracked();
    try {
      // As printed, at the repository root; dist/ is fresh, so its build step is skipped.
      execFileSync('sh', ['-c', `${command.trim()} --ignore-scripts`], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
      expect(existsSync(tarball)).toBe(true);
      expect(untracked()).toEqual(before);
    } finally {
      rmSync(tarball, { force: true });
    }
  });
});
