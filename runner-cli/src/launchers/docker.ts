// The `docker` launcher: the sandbox is a container running `docket-runner daemon -- <command>`,
// labelled with the run id and attempt. The runner's own package is mounted read-only at
// /opt/docket-runner, so the image needs node (and git, for the patch) but no runner install.
// Credentials go to `docker run` as `--env NAME` with the value in the docker CLI's environment,
// so they never appear in a process listing. After a restart the container is found by its labels
// (spec/dispatch-lifecycle.md names "the open-source Docker runner"; runner-cli/README.md, "Docker
// launcher").
import { execFile, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, relative } from 'node:path';
import { PACKAGE_DIR } from '../package-dir.js';
import { sleep } from '../procs.js';
import { afterHandshake, LaunchError, prepareSandbox, removeWorkDir } from './common.js';
import type { ExitInfo, JobPaths, LaunchRequest, Sandbox } from './launcher.js';

export const RUNNER_PACKAGE_DIR = PACKAGE_DIR;

/** How long a stop waits for the stopped container's output to be kept and the container removed. */
const STOPPED_REMOVAL_WAIT_MS = 5_000;
/** How long a stopped container's output may take to reach sandbox.log before the container is removed. */
const LOG_COPY_WAIT_MS = 2_000;

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
  hostGateway?: boolean;
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
  if (o.hostGateway) argv.push('--add-host', `${HOST_GATEWAY_NAME}:host-gateway`);
  for (const name of [...o.envNames].sort()) argv.push('--env', name);
  argv.push(o.image, 'node', '/opt/docket-runner/bin/docket-runner.mjs', 'daemon', '--', ...o.command);
  return argv;
}

/** The name a container reaches the engine's host by (docker's `host-gateway`). */
export const HOST_GATEWAY_NAME = 'host.docker.internal';

/**
 * The server's URL as the container's daemon reaches it. A container on its own network has its
 * own loopback, so a server on the runner's loopback is reached through the engine's host gateway
 * instead (the server must listen there too); on the host's network the URL stays as it is.
 */
export function containerServerUrl(serverUrl: string, network?: string | null): { url: string; hostGateway: boolean } {
  const u = URL.canParse(serverUrl) ? new URL(serverUrl) : null;
  if (network === 'host' || !u) return { url: serverUrl, hostGateway: false };
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!(host === 'localhost' || host === '::1' || /^127\./.test(host))) return { url: serverUrl, hostGateway: false };
  return { url: serverUrl.replace(u.hostname, HOST_GATEWAY_NAME), hostGateway: true };
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
  const server = containerServerUrl(env.DOCKET_URL, network);
  env.DOCKET_URL = server.url;
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
    hostGateway: server.hostGateway,
    user: typeof process.getuid === 'function' ? `${process.getuid()}:${process.getgid?.()}` : null,
  });
  const id = await docker(dockerPath, argv, { env: { ...process.env, ...env }, timeoutMs: req.checkoutTimeoutMs, signal: req.signal });
  const sandbox = dockerSandbox(dockerPath, id, paths);
  return afterHandshake(sandbox, () => sandbox.remove(0), paths.stateDir, { exited: () => !sandbox.running(), timeoutMs: req.handshakeTimeoutMs });
}

/**
 * The containers of a job found after a restart, by the attempt's labels: a running one is
 * reattached; any other (one that ended while no runner watched) is removed, its output kept in
 * sandbox.log, and the daemon's files tell how it ended. The container's name, one per attempt,
 * keeps `docker run` from ever making a second.
 */
export async function adoptDocker(row: { run_id: string; attempt: number; sandbox_id: string | null }, paths: JobPaths, dockerPath: string) {
  let found: string;
  try {
    found = await docker(dockerPath, ['ps', '--all', '--no-trunc', '--format', '{{.ID}} {{.State}}', ...labelFilters(row.run_id, row.attempt)], { timeoutMs: 15_000 });
  } catch {
    return null;
  }
  let adopted: Sandbox | null = null;
  for (const [id, state] of found.split('\n').filter(Boolean).map((l) => l.split(' '))) {
    if (state === 'running' && !adopted) adopted = dockerSandbox(dockerPath, id, paths);
    else await removeContainer(dockerPath, id, paths.logFile);
  }
  return adopted;
}

/** `docker ps` filters for one attempt's containers. */
function labelFilters(runId: string, attempt: number) {
  return ['--filter', `label=docket.run_id=${runId}`, '--filter', `label=docket.attempt=${attempt}`];
}

/**
 * The container's output, from its start, copied into the job's sandbox.log while it runs (the
 * log starts over on a reattach, since the engine keeps all of it). Resolves when the copy ends,
 * which is when the container has stopped.
 */
function followLogs(dockerPath: string, id: string, logFile: string): Promise<void> {
  return new Promise((resolve) => {
    const fd = openSync(logFile, 'w', 0o600);
    const logs = spawn(dockerPath, ['logs', '--follow', id], { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    logs.on('error', () => resolve());
    logs.on('exit', () => resolve());
    logs.unref();
  });
}

/** Keep a stopped container's output in sandbox.log, then remove the container. */
async function removeContainer(dockerPath: string, id: string, logFile: string, logged?: Promise<void>) {
  await Promise.race([logged ?? followLogs(dockerPath, id, logFile), sleep(LOG_COPY_WAIT_MS)]);
  await docker(dockerPath, ['rm', '--force', id], { timeoutMs: 30_000 }).catch(() => {});
}

/**
 * A container as the job supervises it. Once it exits it is removed (its output kept in
 * sandbox.log): a job that ends by itself, is stopped or runs out of lifetime leaves no container.
 */
function dockerSandbox(dockerPath: string, id: string, paths: JobPaths): Sandbox {
  let done = false;
  const logged = followLogs(dockerPath, id, paths.logFile);
  const exited = new Promise<ExitInfo>((resolve) => {
    const w = spawn(dockerPath, ['wait', id], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    w.stdout.on('data', (d) => (out += d));
    const end = async (code: number | null) => {
      await removeContainer(dockerPath, id, paths.logFile, logged);
      done = true;
      resolve({ code, signal: null });
    };
    w.on('error', () => end(null));
    w.on('exit', () => {
      const code = Number.parseInt(out.trim(), 10);
      end(Number.isFinite(code) ? code : null);
    });
    w.unref();
  });
  const stop = async (graceMs: number) => {
    if (done) return;
    await docker(dockerPath, ['stop', '-t', String(Math.ceil(graceMs / 1000)), id], { timeoutMs: graceMs + 30_000 }).catch(() => {});
    await Promise.race([exited, sleep(STOPPED_REMOVAL_WAIT_MS)]);
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
      if (!done) await removeContainer(dockerPath, id, paths.logFile, logged);
      removeWorkDir(paths);
    },
  };
}
