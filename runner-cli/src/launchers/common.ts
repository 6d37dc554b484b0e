// What every launcher shares: the per-run directories, the repository checkout, the sandbox's
// environment and the daemon's launch handshake.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NEVER_PASSED_ENV, RUNNER_OWNED_ENV } from '../config.js';
import { git } from '../git.js';
import { sleep } from '../procs.js';
import type { JobPaths, LaunchRequest, Sandbox } from './launcher.js';

export class LaunchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LaunchError';
  }
}

/** A continuation's checkpoint that did not verify: the runner reports checkpoint-unusable, never launches. */
export class CheckpointUnusable extends LaunchError {
  constructor(message: string) {
    super(message);
    this.name = 'CheckpointUnusable';
  }
}

/** Variables handed to the agent by default; --pass-env adds more. */
export const BASE_ENV = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TMPDIR', 'SHELL', 'TERM'];

/**
 * The per-run layout under the data directory:
 *   jobs/<run>/<attempt>/work      the agent's working directory (the repository checkout)
 *   jobs/<run>/<attempt>/docket    files shared with the daemon (launch.json, status.json, final.json, result.json)
 *   jobs/<run>/<attempt>/sandbox.log  the sandbox's stdout and stderr
 *   jobs/<run>/<attempt>/publish  a publication's fresh clone, never shown to the sandbox
 */
export function jobPaths(dataDir: string, runId: string, attempt: number): JobPaths {
  const safe = runId.replace(/[^A-Za-z0-9_.-]/g, '_');
  const jobDir = join(dataDir, 'jobs', safe, String(attempt));
  return {
    jobDir,
    workDir: join(jobDir, 'work'),
    stateDir: join(jobDir, 'docket'),
    logFile: join(jobDir, 'sandbox.log'),
    publishDir: join(jobDir, 'publish'),
  };
}

/**
 * A removed sandbox's files: the work directory goes at once; sandbox.log and the daemon's state
 * files stay until the log retention period has passed (runner-cli/README.md, "Logs").
 */
export function removeWorkDir(paths: { workDir: string }) {
  rmSync(paths.workDir, { recursive: true, force: true });
}

export function freshJobDirs(paths: { jobDir: string; workDir: string; stateDir: string }) {
  rmSync(paths.jobDir, { recursive: true, force: true });
  mkdirSync(paths.workDir, { recursive: true, mode: 0o700 });
  mkdirSync(paths.stateDir, { recursive: true, mode: 0o700 });
}

/**
 * Clone the run's repository into the work directory and check out the pinned commit.
 * @param workDir an empty directory
 * @returns the checked-out revision
 */
export async function checkoutRepository(repository: { url: string; commit?: string | null }, workDir: string, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<string> {
  if (!repository?.url) throw new LaunchError('the run names a repository without a url');
  await git(['clone', '--quiet', '--no-checkout', '--', repository.url, workDir], opts);
  const ref = repository.commit || 'HEAD';
  await git(['-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', ref, '--'], { ...opts, cwd: workDir });
  return (await git(['rev-parse', 'HEAD'], { ...opts, cwd: workDir })).trim();
}

/**
 * What every launcher does first: fresh job directories, the repository checked out at the pinned
 * commit when the run names one, the launch command checked, and the sandbox's environment with
 * the daemon's variables (its state directory as the sandbox sees it).
 */
export async function prepareSandbox(req: LaunchRequest, stateDirInSandbox: string): Promise<{ command: string[]; env: Record<string, string> }> {
  const { paths, claim, signal } = req;
  freshJobDirs(paths);
  let sourceRevision = null;
  if (claim.repository) {
    sourceRevision = await checkoutRepository(claim.repository, paths.workDir, { timeoutMs: req.checkoutTimeoutMs, signal });
  }
  if (claim.checkpoint) {
    sourceRevision = await restoreCheckpoint(claim.checkpoint, sourceRevision, paths, { timeoutMs: req.checkoutTimeoutMs, signal });
  }
  const command = claim.launch?.command;
  if (!Array.isArray(command) || command.length === 0) throw new LaunchError('the run has no launch command');
  // The task itself: the run's brief, as dispatched (an autopilot run's is its issue's title and body).
  writeFileSync(join(paths.stateDir, 'brief.md'), String(claim.brief ?? ''), { mode: 0o600 });
  const env = sandboxEnv(process.env, req.passEnv, claim.launch?.env, {
    ...req.docketEnv,
    DOCKET_BRIEF_FILE: `${stateDirInSandbox}/brief.md`,
    DOCKET_STATE_DIR: stateDirInSandbox,
    DOCKET_RESULT_FILE: `${stateDirInSandbox}/result.json`,
    DOCKET_CHECKPOINT_FILE: `${stateDirInSandbox}/checkpoint.json`,
    ...(claim.checkpoint ? { DOCKET_RESUME_FILE: `${stateDirInSandbox}/resume.json` } : {}),
    ...(sourceRevision ? { DOCKET_SOURCE_REVISION: sourceRevision } : {}),
  });
  return { command: command.map(String), env };
}

/** A continuation's checkpoint as the claim grant carries it (docs/protocol.md, "Pause and resume"). */
export type GrantCheckpoint = {
  attempt: number;
  session_id: string | null;
  last_phase: string | null;
  pending_actions: string[];
  session: string | null;
  patch: string;
  source_revision: string | null;
  note: string | null;
  at_ms: number;
};

/**
 * Verifies a continuation's checkpoint against the fresh checkout and restores it: the source
 * revision must be reachable (it is checked out), the patch must apply (`git apply --check`), and a
 * session the checkpoint names must be there and readable. The session goes to resume.json in the
 * state directory ($DOCKET_RESUME_FILE). Answers the source revision the work is measured against,
 * so the final patch holds every attempt's work. Throws CheckpointUnusable saying what failed.
 */
export async function restoreCheckpoint(cp: GrantCheckpoint, checkedOut: string | null, paths: JobPaths, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<string | null> {
  const session = readSession(cp);
  const revision = cp.source_revision ?? checkedOut;
  if (cp.patch && !revision) throw new CheckpointUnusable('the checkpoint has work but the run has no repository to restore it into');
  if (revision && revision !== checkedOut) {
    await git(['cat-file', '-e', `${revision}^{commit}`], { ...opts, cwd: paths.workDir }).catch(() => {
      throw new CheckpointUnusable(`the checkpoint's source revision ${revision} is not reachable in the checkout`);
    });
    await git(['-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', revision, '--'], { ...opts, cwd: paths.workDir });
  }
  if (cp.patch) {
    const patchFile = join(paths.stateDir, 'checkpoint.patch');
    writeFileSync(patchFile, cp.patch);
    await git(['apply', '--check', '--binary', patchFile], { ...opts, cwd: paths.workDir }).catch((e) => {
      throw new CheckpointUnusable(`the checkpoint's patch does not apply to ${revision}: ${e.message}`);
    });
    await git(['apply', '--binary', patchFile], { ...opts, cwd: paths.workDir });
  }
  const { patch: _patch, session: _text, ...rest } = cp;
  writeFileSync(join(paths.stateDir, 'resume.json'), JSON.stringify({ ...rest, session, source_revision: revision }) + '\n', { mode: 0o600 });
  return revision;
}

/** The checkpoint's session, parsed; a session it names but does not carry, or cannot be read, is unusable. */
function readSession(cp: GrantCheckpoint): unknown {
  if (cp.session === null || cp.session === undefined) {
    if (cp.session_id) throw new CheckpointUnusable(`the checkpoint names session ${cp.session_id} but carries no session`);
    return null;
  }
  try {
    return JSON.parse(cp.session);
  } catch (e) {
    throw new CheckpointUnusable(`the checkpoint's session is not readable JSON: ${(e as Error).message}`);
  }
}

/**
 * The sandbox's environment: a small allow-list of the runner's own variables (never a DOCKET_*
 * one, so the machine token cannot leak), the run's launch.env (but the names the runner owns),
 * then the daemon's variables.
 */
export function sandboxEnv(runnerEnv: Record<string, string | undefined>, passEnv: string[], launchEnv: Record<string, string> | null | undefined, docketEnv: Record<string, string>) {
  const env: Record<string, string> = {};
  for (const name of [...BASE_ENV, ...passEnv]) {
    const v = runnerEnv[name];
    if (v !== undefined && !NEVER_PASSED_ENV.test(name)) env[name] = v;
  }
  for (const [k, v] of Object.entries(launchEnv ?? {})) {
    if (!RUNNER_OWNED_ENV.test(k) && typeof v === 'string') env[k] = v;
  }
  return { ...env, ...docketEnv };
}

/**
 * Wait for the daemon's launch handshake: it writes launch.json once the agent process has
 * started (`{"ok": true}`) or failed to (`{"ok": false, "error"}`).
 */
export async function waitForHandshake(stateDir: string, { exited, timeoutMs, logFile }: { exited: () => boolean; timeoutMs: number; logFile?: string }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const hs = readJson(join(stateDir, 'launch.json'));
    if (hs) {
      if (hs.ok) return hs;
      throw new LaunchError(String(hs.error || 'the agent did not start'));
    }
    if (exited()) {
      // Give a last look: the daemon may write launch.json just before it exits.
      const last = readJson(join(stateDir, 'launch.json'));
      if (last?.ok) return last;
      if (last) throw new LaunchError(String(last.error || 'the agent did not start'));
      throw new LaunchError(`the sandbox exited before the agent started${logTail(logFile)}`);
    }
    if (Date.now() > deadline) throw new LaunchError(`the agent did not start within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** The sandbox, once its daemon's handshake came; a sandbox whose agent did not start is cleaned up and the launch fails. */
export async function afterHandshake(sandbox: Sandbox, cleanUp: () => Promise<void>, stateDir: string, opts: Parameters<typeof waitForHandshake>[1]): Promise<Sandbox> {
  try {
    await waitForHandshake(stateDir, opts);
  } catch (e) {
    await cleanUp();
    throw e;
  }
  return sandbox;
}

function logTail(logFile: string | undefined) {
  if (!logFile) return '';
  try {
    const tail = readFileSync(logFile, 'utf8').trim().split('\n').slice(-3).join(' / ');
    return tail ? `: ${tail.slice(-500)}` : '';
  } catch {
    return '';
  }
}

/**  @returns null when missing or not (yet) valid JSON */
export function readJson(path: string): any {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return null;
  }
}
