// The agent's work as a patch on the source revision, read out of its checkout without running
// through it (runner-cli/README.md, "The sandbox boundary"): the work tree is read into a scratch
// index through a git directory the reader owns, never the checkout's own .git, so nothing the
// agent wrote there (config, includes, hooks, fsmonitor, remotes) is read. The daemon reads its
// final patch and a checkpoint's this way, the runner the work it publishes (publish.ts).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { git } from './git.js';

/** How long one of the daemon's git commands may take. */
const DAEMON_GIT_TIMEOUT_MS = 120_000;

export type WorkTreeDiff = {
  /** A git directory of the reader's own that holds `revision`, itself or through `borrowObjects`. */
  gitDir: string;
  workTree: string;
  /** A scratch index file. */
  index: string;
  revision: string;
  /** Where the patch is written. */
  output: string;
  /** Whether files the work tree's .gitignore names are taken too (tracked ones always are). */
  includeIgnored: boolean;
  /** An objects directory read from, never written to (the checkout's .git/objects). */
  borrowObjects?: string;
  timeoutMs: number;
};

/** Writes to `o.output` everything in the work tree that differs from the revision, new files included. */
export async function diffWorkTree(o: WorkTreeDiff) {
  const at = ['--git-dir', o.gitDir, '--work-tree', o.workTree];
  const env: Record<string, string> = { GIT_INDEX_FILE: o.index };
  if (o.borrowObjects) env.GIT_ALTERNATE_OBJECT_DIRECTORIES = o.borrowObjects;
  const opts = { cwd: o.workTree, timeoutMs: o.timeoutMs, env };
  await git([...at, 'read-tree', o.revision], opts);
  await git([...at, 'add', '--all', ...(o.includeIgnored ? ['--force'] : []), '--', '.'], opts);
  await git([...at, '-c', 'core.quotepath=off', 'diff', '--cached', '--binary', '--no-color', '--no-ext-diff', '--no-textconv', `--output=${o.output}`, o.revision], opts);
}

/** The commit checked out in `cwd`, or null outside a repository (asked before the agent starts). */
export async function headRevision(cwd: string) {
  try {
    return (await git(['rev-parse', '--verify', '--quiet', 'HEAD'], { cwd, timeoutMs: DAEMON_GIT_TIMEOUT_MS })).trim() || null;
  } catch {
    return null;
  }
}

/**
 * Everything the agent changed in the checkout `cwd` against the source revision, new and ignored
 * files included, read through a scratch git directory that borrows the checkout's objects. Empty
 * without a source revision.
 */
export async function computePatch(cwd: string, sourceRevision: string | null): Promise<{ patch: string; problem: string | null }> {
  if (!sourceRevision) return { patch: '', problem: null };
  const dir = mkdtempSync(join(tmpdir(), 'docket-patch-'));
  try {
    const gitDir = join(dir, 'git');
    await git(['init', '--quiet', '--bare', '--template=', gitDir], { timeoutMs: DAEMON_GIT_TIMEOUT_MS });
    const o = { gitDir, workTree: cwd, index: join(dir, 'index'), revision: sourceRevision, output: join(dir, 'work.patch'), borrowObjects: join(cwd, '.git', 'objects'), timeoutMs: DAEMON_GIT_TIMEOUT_MS };
    // Ignored files too (a build output the agent meant to keep); the plain rule when that fails.
    await diffWorkTree({ ...o, includeIgnored: true }).catch(() => diffWorkTree({ ...o, includeIgnored: false }));
    return { patch: readFileSync(o.output, 'utf8'), problem: null };
  } catch (e) {
    return { patch: '', problem: (e as Error).message.slice(0, 500) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
