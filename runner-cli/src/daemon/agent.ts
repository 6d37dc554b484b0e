// The agent's process: started without the credential in a process group of its own, followed to
// its exit, stopped (SIGTERM, grace, SIGKILL) and asked to checkpoint (SIGUSR1) on the runner's signals.
import { type ChildProcess, spawn } from 'node:child_process';
import { groupAlive, signalGroup, sleep } from '../procs.js';
import type { Daemon } from './attempt.js';
import { pipeLines, relayLine } from './output.js';
import { writeState } from './sandbox-files.js';

export type AgentExit = { code: number | null; signal: NodeJS.Signals | null };

/** The running agent: its process, its exit (and whether it came), and the end of its output. */
export type Agent = { child: ChildProcess; exit: Promise<AgentExit>; exited: boolean; streamsDone: Promise<unknown> };

/** The agent gets everything but the credential and the daemon's own plumbing. */
export function agentEnvironment(env: Record<string, string | undefined>) {
  const agentEnv = { ...env };
  delete agentEnv.DOCKET_ATTEMPT_TOKEN;
  delete agentEnv.DOCKET_STATE_DIR;
  for (const k of Object.keys(agentEnv)) if (k.startsWith('DOCKET_DAEMON_')) delete agentEnv[k];
  return agentEnv;
}

/** Start the agent; resolves once it runs, or with why it could not start. */
export async function spawnAgent(command: string[], cwd: string, env: Record<string, string | undefined>): Promise<{ child: ChildProcess } | { error: string }> {
  // Its own process group, so a pause can wait for the agent and every process it started to exit.
  const child = spawn(command[0], command.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const failed = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', (e) => resolve(e));
  });
  if (!failed) return { child };
  return { error: failed.code === 'ENOENT' ? `agent command not found: ${command[0]}` : `agent command failed to start: ${failed.message}` };
}

/** The agent runs: record the launch, and follow its output into the reports and its exit. */
export function followAgent(d: Daemon, child: ChildProcess, echo: (chunk: string) => void): Agent {
  writeState(d.stateDir, 'launch.json', { ok: true, agent_pid: child.pid, source_revision: d.sourceRevision, at_ms: Date.now() });
  const exit = new Promise<AgentExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const onLine = (line: string) => relayLine(d, line);
  const streamsDone = Promise.all([pipeLines(child.stdout, onLine, echo), pipeLines(child.stderr, onLine, echo)]);
  const agent: Agent = { child, exit, exited: false, streamsDone };
  // Registered before anything else waits on the exit, so every waiter wakes to `exited` set.
  exit.then(() => (agent.exited = true));
  return agent;
}

/**
 * SIGTERM or SIGINT (the runner's stop request or lifetime) stops the agent; the runner reports the
 * stop. SIGUSR1 (the runner's pause) asks the agent to checkpoint.
 */
export function stopOnSignals(d: Daemon, agent: Agent) {
  let signalled = () => {};
  const received = new Promise<void>((resolve) => (signalled = resolve));
  const onSignal = (sig: NodeJS.Signals) => {
    d.stopping = true;
    signalled();
    void stopAgent(d, agent, `received ${sig}`);
  };
  const onPause = () => void askAgentToCheckpoint(d, agent);
  const handlers: Array<[NodeJS.Signals, (sig: NodeJS.Signals) => void]> = [['SIGTERM', onSignal], ['SIGINT', onSignal], ['SIGUSR1', onPause]];
  for (const [sig, handler] of handlers) process.on(sig, handler);
  const remove = () => {
    for (const [sig, handler] of handlers) process.off(sig, handler);
  };
  return { received, remove };
}

/** SIGTERM to the agent's process group, then SIGKILL after the grace period; resolves at the agent's exit. */
export async function stopAgent(d: Daemon, agent: Agent, why: string) {
  const { child } = agent;
  if (child.exitCode !== null || child.signalCode !== null) return;
  d.log(`docket-runner daemon: stopping the agent: ${why}`);
  signalAgent(agent, 'SIGTERM');
  const t = setTimeout(() => signalAgent(agent, 'SIGKILL'), d.limits.stopGraceMs);
  await agent.exit;
  clearTimeout(t);
}

/** The agent's whole process group, or the agent alone where the group is gone. */
function signalAgent(agent: Agent, sig: NodeJS.Signals) {
  if (!signalGroup(agent.child.pid as number, sig)) agent.child.kill(sig);
}

/**
 * The pause (runner-cli/README.md, "The agent's side"): SIGUSR1 to the agent, which writes
 * $DOCKET_CHECKPOINT_FILE and exits; one that has not exited after the checkpoint grace is stopped,
 * and the checkpoint says so.
 */
async function askAgentToCheckpoint(d: Daemon, agent: Agent) {
  if (d.pausing || d.stopping || agent.exited) return;
  d.pausing = true;
  d.log('docket-runner daemon: pause requested: asking the agent to checkpoint');
  agent.child.kill('SIGUSR1');
  const exited = await Promise.race([agent.exit.then(() => true), sleep(d.limits.checkpointGraceMs).then(() => false)]);
  if (exited || d.stopping) return;
  d.checkpointNote = `the agent did not exit within ${d.limits.checkpointGraceMs} ms of the checkpoint request and was stopped`;
  await stopAgent(d, agent, 'it did not checkpoint within the grace period');
}

/**
 * After the agent's exit, a pause waits until every process of the agent's group has exited too
 * (bounded: the stop grace, then SIGKILL), so the work measured is settled.
 */
export async function settleAgentGroup(d: Daemon, agent: Agent) {
  const pgid = agent.child.pid as number;
  const deadline = Date.now() + d.limits.stopGraceMs;
  while (groupAlive(pgid) && Date.now() < deadline) await sleep(100);
  if (!groupAlive(pgid)) return;
  d.log("docket-runner daemon: the agent's child processes outlived it; stopping them");
  signalGroup(pgid, 'SIGKILL');
  for (let i = 0; i < 50 && groupAlive(pgid); i++) await sleep(100);
}

export function signalNumber(sig: NodeJS.Signals | null) {
  const nums = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15, SIGPIPE: 13, SIGABRT: 6, SIGSEGV: 11 } as Record<string, number>;
  return sig ? (nums[sig] ?? 0) : 0;
}
