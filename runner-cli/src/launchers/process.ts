// The `process` launcher: the sandbox is `docket-runner daemon -- <command>` started in a fresh
// work directory as the leader of its own process group, detached from the runner, so it outlives a
// runner restart and can be stopped as a whole (SIGTERM to the group, a grace period, SIGKILL).
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_DIR } from '../package-dir.js';
import { groupAlive, processStartTicks, signalGroup, signalProcess, sleep } from '../procs.js';
import { afterHandshake, LaunchError, prepareSandbox, readJson, removeWorkDir } from './common.js';
import type { ExitInfo, JobPaths, LaunchRequest, Sandbox } from './launcher.js';

export const RUNNER_BIN = join(PACKAGE_DIR, 'bin', 'docket-runner.mjs');

export async function launchProcess(req: LaunchRequest): Promise<Sandbox> {
  const { command, env } = await prepareSandbox(req, req.paths.stateDir);
  return startDaemon(req, command, env);
}

/**
 * `docket-runner daemon -- <command>` in the work directory, once its handshake came. The e2b
 * launcher starts its daemon here too, with the relay to its sandbox as the agent command.
 */
export async function startDaemon(req: LaunchRequest, command: string[], env: Record<string, string>): Promise<Sandbox> {
  const { paths } = req;
  const log = openSync(paths.logFile, 'a', 0o600);
  let child;
  try {
    child = spawn(process.execPath, [RUNNER_BIN, 'daemon', '--', ...command], {
      cwd: paths.workDir,
      env,
      detached: true, // its own process group, and it survives the runner
      stdio: ['ignore', log, log],
    });
  } finally {
    closeSync(log);
  }
  let exit: ExitInfo | null = null;
  const leaderExited = new Promise<ExitInfo>((resolve) => {
    child.once('exit', (code, sig) => {
      exit = { code, signal: sig };
      resolve(exit);
    });
    child.once('error', () => {
      exit = { code: null, signal: null };
      resolve(exit);
    });
  });
  child.unref();
  const pid = child.pid;
  if (!pid) {
    await leaderExited;
    throw new LaunchError('could not start the sandbox process');
  }
  const sandbox = processSandbox(pid, processStartTicks(pid), paths, leaderExited.then(async (info) => {
    // The daemon is gone: whatever it left in its group, and in its agent's, goes too.
    signalGroup(pid, 'SIGKILL');
    killAgentGroup(paths);
    return info;
  }));
  return afterHandshake(sandbox, () => sandbox.stop(0), paths.stateDir, { exited: () => exit !== null, timeoutMs: req.handshakeTimeoutMs, logFile: paths.logFile });
}

/**
 * Find the sandbox of a job recorded before a restart. Null when nothing of it runs any more.
 */
export function adoptProcess(row: { sandbox_pid: number | null; sandbox_start_ticks: string | null }, paths: JobPaths): Sandbox | null {
  const pid = row.sandbox_pid;
  if (!pid || !groupAlive(pid)) return null;
  const ticks = processStartTicks(pid);
  // The leader may be gone while its group lives on; if the leader pid runs, it must be ours.
  if (ticks && row.sandbox_start_ticks && ticks !== row.sandbox_start_ticks) return null;
  const gone = (async () => {
    while (groupAlive(pid)) await sleep(250);
    return { code: null, signal: null } as ExitInfo;
  })();
  return processSandbox(pid, row.sandbox_start_ticks, paths, gone);
}

/**
 * The agent runs in a process group of its own (so a pause can wait for all of it, see
 * daemon/agent.ts): a daemon killed before it could stop the agent must not leave that group behind.
 */
function killAgentGroup(paths: JobPaths) {
  const agentPid = readJson(join(paths.stateDir, 'launch.json'))?.agent_pid;
  if (Number.isSafeInteger(agentPid) && agentPid > 1) signalGroup(agentPid, 'SIGKILL');
}

/**
 * @param pid the group leader (the daemon)
 */
function processSandbox(pid: number, startTicks: string | null, paths: JobPaths, leaderGone: Promise<ExitInfo>): Sandbox {
  let done = false;
  const exited = leaderGone.then(async (info) => {
    for (let i = 0; i < 100 && groupAlive(pid); i++) await sleep(50);
    done = true;
    return info;
  });
  const stop = async (graceMs: number) => {
    if (done || !groupAlive(pid)) return;
    signalGroup(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline && groupAlive(pid)) await sleep(50);
    if (groupAlive(pid)) signalGroup(pid, 'SIGKILL');
    killAgentGroup(paths);
    for (let i = 0; i < 100 && groupAlive(pid); i++) await sleep(50);
  };
  return {
    id: `process-${pid}`,
    pid,
    startTicks,
    running: () => !done && groupAlive(pid),
    exited,
    stop,
    signal: async (sig) => !done && signalProcess(pid, sig),
    remove: async (graceMs) => {
      await stop(graceMs);
      removeWorkDir(paths);
    },
  };
}
