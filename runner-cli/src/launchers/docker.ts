// The `docker` launcher: the sandbox is a container running `docket-runner daemon -- <command>`,
// labelled with the run id and attempt. The runner's own package is mounted read-only at
// /opt/docket-runner, so the image needs node (and git, for the patch) but no runner install.
// Credentials go to `docker run` as `--env NAME` with the value in the docker CLI's environment,
// so they never appear in a process listing.
import { execFile, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, relative } from 'node:path';
import { PACKAGE_DIR } from '../package-dir.js';
import { sleep } from '../procs.js';
import { afterHandshake, LaunchError, prepareSandbox, removeWorkDir } from './common.js';
import type { ExitInfo, JobPaths, LaunchRequest, Sandbox } from './launcher.js';

export const RUNNER_PACKAGE_DIR = PACKAGE_DIR;

/**
 * zod, which the daemon's protocol client needs. An installed runner has it under its package
 * directory; a checkout has it hoisted to the repository's node_modules, outside the mount, so it
 * is mounted where Node looks next from /opt/docket-runner: /opt/node_modules.
 */
export const ZOD_DIR = dirname(createRequire(import.meta.url).resolve('zod/package.json'));

/** Whether `dir` lies inside `parent` (or is it). */
function inside(parent: string, dir: string) {
  const rel = relative(parent, dir);
  return !rel.startsWith('..') && !rel.startsWith('/');
}

/**
 * The argv of `docker run` for one attempt. Pure, so it can be checked without a docker engine.
 */
export function dockerRunArgv(o: {
  runId: string; attempt: number; image: string; command: string[]; workDir: string; stateDir: string;
  runnerDir: string; envNames: string[]; network?: string | null; user?: string | null; zodDir?: string | null;
}): string[] {
  const argv = [
    'run',
    '--detach',
    '--name', containerName(o.runId, o.attempt),
    '--label', `docket.run_id=${o.runId}`,
    '--label', `docket.attempt=${o.attempt}`,
    '--label', 'docket.managed=true',
    '--init', // a real PID 1 that forwards SIGTERM to the daemon
    '--stop-signal', 'SIGTERM',
    '--volume', `${o.workDir}:/workspace`,
    '--volume', `${o.stateDir}:/docket`,
    '--volume', `${o.runnerDir}:/opt/docket-runner:ro`,
    '--workdir', '/workspace',
  ];
  if (o.zodDir && !inside(o.runnerDir, o.zodDir)) argv.push('--volume', `${o.zodDir}:/opt/node_modules/zod:ro`);
  if (o.user) argv.push('--user', o.user);
  if (o.network) argv.push('--network', o.network);
  for (const name of [...o.envNames].sort()) argv.push('--env', name);
  argv.push(o.image, 'node', '/opt/docket-runner/bin/docket-runner.mjs', 'daemon', '--', ...o.command);
  return argv;
}

/** Docker names allow [a-zA-Z0-9_.-]. */
export function containerName(runId: string, attempt: number) {
  return `docket-${runId.replace(/[^a-zA-Z0-9_.-]/g, '_')}-${attempt}`;
}

function docker(dockerPath: string, args: string[], { env, timeoutMs = 120_000, signal }: { env?: Record<string, string | undefined>; timeoutMs?: number; signal?: AbortSignal } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(dockerPath, args, { env: env ?? process.env, timeout: timeoutMs, signal, maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new LaunchError(`docker ${args[0]} failed: ${String(stderr || err.message).trim().split('\n').slice(-3).join(' / ')}`));
      else resolve(stdout.trim());
    });
  });
}

/** The docker launcher's own settings (--docker-path, --docker-image, --docker-network). */
export type DockerSettings = { dockerPath: string; image: string; network?: string | null };

export async function launchDocker(req: LaunchRequest, { dockerPath, image, network }: DockerSettings): Promise<Sandbox> {
  const { paths, claim } = req;
  const { command, env } = await prepareSandbox(req, '/docket');
  // The image's PATH and HOME, not the host's (the docker CLI itself keeps the host's, for its config).
  delete env.PATH;
  delete env.HOME;
  const argv = dockerRunArgv({
    runId: claim.run_id,
    attempt: claim.attempt,
    image: claim.launch?.image || image,
    command,
    workDir: paths.workDir,
    stateDir: paths.stateDir,
    runnerDir: RUNNER_PACKAGE_DIR,
    zodDir: ZOD_DIR,
    envNames: Object.keys(env),
    network,
    user: typeof process.getuid === 'function' ? `${process.getuid()}:${process.getgid?.()}` : null,
  });
  const id = await docker(dockerPath, argv, { env: { ...process.env, ...env }, timeoutMs: req.checkoutTimeoutMs, signal: req.signal });
  const sandbox = dockerSandbox(dockerPath, id, paths);
  return afterHandshake(sandbox, () => sandbox.remove(0), paths.stateDir, { exited: () => !sandbox.running(), timeoutMs: req.handshakeTimeoutMs });
}

export async function adoptDocker(row: { sandbox_id: string | null }, paths: JobPaths, dockerPath: string) {
  if (!row.sandbox_id) return null;
  try {
    const state = await docker(dockerPath, ['inspect', '--format', '{{.State.Running}}', row.sandbox_id], { timeoutMs: 15_000 });
    if (state !== 'true') return null;
  } catch {
    return null;
  }
  return dockerSandbox(dockerPath, row.sandbox_id, paths);
}

function dockerSandbox(dockerPath: string, id: string, paths: JobPaths): Sandbox {
  let done = false;
  const exited = new Promise<ExitInfo>((resolve) => {
    const w = spawn(dockerPath, ['wait', id], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    w.stdout.on('data', (d) => (out += d));
    w.on('error', () => {
      done = true;
      resolve({ code: null, signal: null });
    });
    w.on('exit', () => {
      done = true;
      const code = Number.parseInt(out.trim(), 10);
      resolve({ code: Number.isFinite(code) ? code : null, signal: null });
    });
    w.unref();
  });
  const stop = async (graceMs: number) => {
    if (done) return;
    await docker(dockerPath, ['stop', '--time', String(Math.ceil(graceMs / 1000)), id], { timeoutMs: graceMs + 30_000 }).catch(() => {});
    for (let i = 0; i < 40 && !done; i++) await sleep(50);
  };
  return {
    id,
    pid: null,
    startTicks: null,
    running: () => !done,
    exited,
    stop,
    signal: async (sig) => {
      if (done) return false;
      return docker(dockerPath, ['kill', '--signal', sig, id], { timeoutMs: 30_000 }).then(() => true, () => false);
    },
    remove: async (graceMs) => {
      await stop(graceMs);
      await docker(dockerPath, ['rm', '--force', id], { timeoutMs: 30_000 }).catch(() => {});
      removeWorkDir(paths);
    },
  };
}
