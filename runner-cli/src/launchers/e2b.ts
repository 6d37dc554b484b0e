// The `e2b` launcher: the agent runs in an E2B sandbox (the seed's hosted sandbox,
// shared/spec/build-lifecycle.md, "Runner states are separate from page labels"), created with the
// official SDK from the run's template (launch.image) or the runner's, its timeout the attempt's
// lifetime, its metadata the run id, attempt and machine. The daemon stays on this machine, so the
// run-attempt token and the E2B API key never enter the sandbox: its agent command is the relay
// (e2b-relay.ts), which drives the agent's command through the SDK and takes its work out as bytes.
// runner-cli/README.md, "E2B launcher", says why.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sandbox as E2bSandbox } from 'e2b';
import { adoptProcess, startDaemon } from './process.js';
import { LaunchError, prepareSandbox, removeWorkDir } from './common.js';
import { LauncherRefused, type JobPaths, type LaunchRequest, type Sandbox } from './launcher.js';

/** The relay the daemon runs as its agent command. */
export const RELAY_JS = fileURLToPath(new URL('./e2b-relay.js', import.meta.url));
/**
 * The sandbox's timeout is the attempt's lifetime plus this margin: the runner's own lifetime
 * deadline stops the attempt first (and reports why); E2B's timeout is the backstop when no runner does.
 */
const TIMEOUT_MARGIN_MS = 60_000;
/** The most one E2B call (create, connect, list, kill, an upload) may take. */
const E2B_CALL_TIMEOUT_MS = 60_000;
/** The sandboxes listed in one page of the startup sweep, and the pages read. */
const SWEEP_PAGE = 100;
const SWEEP_PAGES = 10;

/** The e2b launcher's own settings (--e2b-template, --e2b-api-url, --e2b-sandbox-url, the API key). */
export type E2bSettings = { apiKey: string | null; template: string; apiUrl?: string | null; sandboxUrl?: string | null; machineId: string | null };

/** The SDK's connection options: the key and the endpoints, never read from the agent's environment. */
export function connection(s: Pick<E2bSettings, 'apiKey' | 'apiUrl' | 'sandboxUrl'>) {
  return {
    ...(s.apiKey ? { apiKey: s.apiKey } : {}),
    ...(s.apiUrl ? { apiUrl: s.apiUrl } : {}),
    ...(s.sandboxUrl ? { sandboxUrl: s.sandboxUrl } : {}),
    requestTimeoutMs: E2B_CALL_TIMEOUT_MS,
  };
}

/** One word for the sandbox's shell, whatever it holds. */
export const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** A refused key is the runner's configuration, not this run's: say so as LauncherRefused. */
function e2bFailure(what: string, e: unknown): Error {
  const err = e as Error;
  if (err?.name === 'AuthenticationError') return new LauncherRefused(`E2B refused the API key (${what}): ${err.message}`);
  return new LaunchError(`E2B ${what} failed: ${err?.message ?? String(e)}`);
}

export async function launchE2b(req: LaunchRequest, s: E2bSettings): Promise<Sandbox> {
  const { claim, paths } = req;
  // The checkout is made here, by the runner, and goes into the sandbox as a tarball.
  const { command, env } = await prepareSandbox(req, paths.stateDir);
  const tarball = await tarWorkDir(paths.workDir);
  const { Sandbox: Sdk } = await import('e2b');
  let sbx: E2bSandbox;
  try {
    sbx = await Sdk.create(claim.launch?.image || s.template, {
      ...connection(s),
      timeoutMs: req.lifetimeMs + TIMEOUT_MARGIN_MS,
      signal: req.signal,
      metadata: { docket_run_id: String(claim.run_id), docket_attempt: String(claim.attempt), docket_machine: s.machineId ?? '' },
    });
  } catch (e) {
    throw e2bFailure('sandbox create', e);
  }
  req.recordSandbox(sbx.sandboxId);
  try {
    const relay = await fillSandbox(sbx, tarball, paths, command, env, req.signal);
    writeFileSync(join(paths.stateDir, 'e2b-relay.json'), JSON.stringify({ ...relay, api_url: s.apiUrl ?? null, sandbox_url: s.sandboxUrl ?? null }), { mode: 0o600 });
    const key: Record<string, string> = s.apiKey ? { DOCKET_E2B_API_KEY: s.apiKey } : {};
    const daemon = await startDaemon(req, [process.execPath, RELAY_JS, join(paths.stateDir, 'e2b-relay.json')], { ...env, ...key });
    return e2bSandbox(daemon, sbx.sandboxId, s, paths);
  } catch (e) {
    await killSandbox(sbx.sandboxId, s);
    throw e instanceof LaunchError ? e : e2bFailure('sandbox setup', e);
  }
}

/**
 * The sandbox gets the checkout under $HOME/work and the daemon's files the agent reads (brief,
 * resume) under $HOME/docket; the relay's settings name them and the agent's environment, whose
 * file variables point into the sandbox, without the credential and without the host's PATH or HOME.
 */
async function fillSandbox(sbx: E2bSandbox, tarball: Buffer, paths: JobPaths, command: string[], env: Record<string, string>, signal?: AbortSignal) {
  // A stop request or a refused lease aborts the launch between any two calls (job.ts keepLeaseWhileLaunching).
  const call = { timeoutMs: E2B_CALL_TIMEOUT_MS, signal };
  const home = (await sbx.commands.run('printf %s "$HOME"', call)).stdout.trim() || '/home/user';
  const work = `${home}/work`;
  const state = `${home}/docket`;
  const write = { useOctetStream: true, requestTimeoutMs: E2B_CALL_TIMEOUT_MS, signal };
  await sbx.files.write(`${state}/work.tar`, new Blob([new Uint8Array(tarball)]), write);
  for (const name of ['brief.md', 'resume.json']) {
    const text = readOptional(join(paths.stateDir, name));
    if (text !== null) await sbx.files.write(`${state}/${name}`, text, write);
  }
  const [w, tar] = [shellQuote(work), shellQuote(`${state}/work.tar`)];
  await sbx.commands.run(`mkdir -p ${w} && tar -xf ${tar} -C ${w} && rm ${tar}`, call);
  signal?.throwIfAborted();
  const envs: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (k === 'PATH' || k === 'HOME' || k === 'DOCKET_ATTEMPT_TOKEN' || k === 'DOCKET_STATE_DIR') continue;
    envs[k] = v.startsWith(`${paths.stateDir}/`) ? `${state}/${v.slice(paths.stateDir.length + 1)}` : v;
  }
  return { sandbox_id: sbx.sandboxId, work_dir: work, state_dir: state, command, envs, source_revision: env.DOCKET_SOURCE_REVISION ?? null };
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** The runner's own checkout as a tarball (tar reads files; nothing of git runs). */
function tarWorkDir(workDir: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile('tar', ['-C', workDir, '-cf', '-', '.'], { encoding: 'buffer', maxBuffer: 512 * 1024 * 1024 }, (err, stdout) => {
      if (err) reject(new LaunchError(`could not pack the checkout for the sandbox: ${err.message}`));
      else resolve(stdout);
    });
  });
}

/** Kills the E2B sandbox; true when it was there. A failure is swallowed: the timeout is the backstop. */
export async function killSandbox(id: string, s: E2bSettings): Promise<boolean> {
  const { Sandbox: Sdk } = await import('e2b');
  return Sdk.kill(id, connection(s)).catch(() => false);
}

/**
 * The attempt's sandbox as the job sees it: the local daemon's process (its pid, its signals)
 * with the E2B sandbox's id. When the daemon is gone (the agent ended, a stop), the E2B sandbox is
 * killed: none outlives its attempt.
 */
function e2bSandbox(daemon: Sandbox, id: string, s: E2bSettings, paths: JobPaths): Sandbox {
  const exited = daemon.exited.then(async (info) => {
    await killSandbox(id, s);
    return info;
  });
  const stop = async (graceMs: number) => {
    await daemon.stop(graceMs);
    await killSandbox(id, s);
  };
  return {
    ...daemon,
    id,
    exited,
    stop,
    remove: async (graceMs) => {
      await stop(graceMs);
      removeWorkDir(paths);
    },
  };
}

/**
 * After a restart: a daemon that still runs is reattached (its relay still drives the sandbox); a
 * sandbox whose daemon is gone has no one to relay it, so it is killed and the attempt goes on
 * as the server says (the job database held its id from before the agent started).
 */
export async function adoptE2b(row: { sandbox_id: string | null; sandbox_pid: number | null; sandbox_start_ticks: string | null }, paths: JobPaths, s: E2bSettings) {
  const daemon = adoptProcess(row, paths);
  if (daemon && row.sandbox_id) return e2bSandbox(daemon, row.sandbox_id, s, paths);
  if (row.sandbox_id) await killSandbox(row.sandbox_id, s);
  return null;
}

/**
 * The startup sweep: every sandbox E2B lists with this machine's metadata that no unfinished job
 * holds is killed (a runner killed between create and recording, or one whose job ended while
 * away). A refused key stops the runner before it claims anything.
 */
export async function sweepE2b(held: Set<string>, s: E2bSettings) {
  const { Sandbox: Sdk } = await import('e2b');
  const pages = Sdk.list({ ...connection(s), query: { metadata: { docket_machine: s.machineId ?? '' } }, limit: SWEEP_PAGE });
  for (let page = 0; page < SWEEP_PAGES && pages.hasNext; page++) {
    let items;
    try {
      items = await pages.nextItems();
    } catch (e) {
      const err = e2bFailure('sandbox list', e);
      if (err instanceof LauncherRefused) throw err;
      return; // the next start sweeps again; the sandboxes' timeouts are the backstop
    }
    for (const item of items) {
      const key = `${item.metadata.docket_run_id}#${item.metadata.docket_attempt}`;
      if (!held.has(key)) await killSandbox(item.sandboxId, s);
    }
  }
}
