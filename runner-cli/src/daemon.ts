// The in-sandbox daemon: `docket-runner daemon -- <agent command>`. It is the only process in the
// sandbox that holds a credential (the run-attempt token): it starts the agent without it, relays
// the agent's phases and output as batched reports (which are the attempt's heartbeats), and sends
// the final result with the patch. See runner-cli/README.md, "The agent's side".
//
// This file is the daemon's course from start to end; each step lives in daemon/:
//   limits.ts          every timing and bound (DOCKET_DAEMON_*), and the exit codes
//   attempt.ts         the attempt it speaks for (client, reports, what happened), and which answers end it
//   agent.ts           the agent's process: spawn, follow, stop, ask to checkpoint
//   output.ts          the agent's output streamed into lines and phases
//   report-batches.ts  output buffered into bounded batches, each report under its seq
//   report-loop.ts     the reports while the agent runs (the attempt's heartbeats)
//   result.ts          the agent's result file, the patch and the final report
//   checkpoint.ts      a pause's checkpoint file, patch and checkpoint call
//   sandbox-files.ts   the state files the runner reads, the JSON files the agent writes
import { signalGroup, sleep } from './procs.js';
import { type Agent, agentEnvironment, followAgent, settleAgentGroup, signalNumber, spawnAgent, stopOnSignals } from './daemon/agent.js';
import { type Daemon, startDaemon } from './daemon/attempt.js';
import { endPaused } from './daemon/checkpoint.js';
import { DAEMON_EXIT } from './daemon/limits.js';
import { hasOutputToSend, reportWhileRunning, sendBatch, stopWhenAttemptOver } from './daemon/report-loop.js';
import { deliverResult } from './daemon/result.js';
import { writeState } from './daemon/sandbox-files.js';

type DaemonOptions = { env?: Record<string, string | undefined>; cwd?: string; log?: (s: string) => void; echo?: (chunk: string) => void };

/**
 * @param command the agent's argv
 * @param opts.echo receives the agent's raw output (by default our stdout, which the launcher sends to sandbox.log)
 * @returns the daemon's exit code
 */
export async function runDaemon(command: string[], { env = process.env, cwd = process.cwd(), log = (s) => process.stderr.write(s + '\n'), echo = (c) => process.stdout.write(c) }: DaemonOptions = {}): Promise<number> {
  const why = usageProblem(command, env);
  if (why) return launchFailed(env.DOCKET_STATE_DIR, log, why, `daemon: ${why}`);
  const daemon = await startDaemon(env, cwd, log);
  const spawned = await spawnAgent(command, cwd, agentEnvironment(env));
  if ('error' in spawned) return launchFailed(daemon.stateDir, log, spawned.error);
  const agent = followAgent(daemon, spawned.child, echo);
  const signals = stopOnSignals(daemon, agent);
  try {
    const agentCode = await superviseAgent(daemon, agent, signals.received);
    if (daemon.attemptOver) return endAttemptOver(daemon, agentCode);
    if (daemon.stopping) return endStopped(daemon, agentCode);
    if (daemon.pausing) return await endPaused(daemon, agentCode, cwd, env.DOCKET_CHECKPOINT_FILE);
    return await deliverResult(daemon, agentCode, cwd, env.DOCKET_RESULT_FILE);
  } finally {
    signals.remove();
    signalGroup(agent.child.pid as number, 'SIGKILL'); // whatever the agent left behind goes with the daemon
  }
}

/** Why the daemon cannot start (no agent command, or a variable the launcher sets is missing), or null. */
function usageProblem(command: string[], env: Record<string, string | undefined>): string | null {
  const missing = ['DOCKET_URL', 'DOCKET_RUN_ID', 'DOCKET_ATTEMPT', 'DOCKET_ATTEMPT_TOKEN'].filter((k) => !env[k]);
  if (command.length === 0) return 'no agent command after --';
  return missing.length > 0 ? `missing ${missing.join(', ')}` : null;
}

/** The launch handshake's failure: the runner reads launch.json to tell a bad launch from a crash. */
function launchFailed(stateDir: string | undefined, log: (s: string) => void, error: string, recorded = error) {
  log(`docket-runner daemon: ${error}`);
  writeState(stateDir, 'launch.json', { ok: false, error: recorded });
  return DAEMON_EXIT.usage;
}

/**
 * Report and watch the attempt until the agent exits; then let the reports and the output in
 * flight settle. Returns the agent's exit code (128 + the signal's number for a signal).
 */
async function superviseAgent(d: Daemon, agent: Agent, stopSignal: Promise<void>): Promise<number> {
  const reporting = reportWhileRunning(d, agent);
  const watching = stopWhenAttemptOver(d, agent);
  const exit = await agent.exit;
  const agentCode = exit.code ?? 128 + signalNumber(exit.signal);
  // A stop from outside signals the whole sandbox at once: the agent's exit can be seen before the
  // daemon's own signal, so an agent that died of a signal waits briefly for it (bounded).
  if (agentCode > 128 && !d.stopping) await Promise.race([stopSignal, sleep(d.limits.stopSignalWaitMs)]);
  if (d.pausing) await settleAgentGroup(d, agent);
  await reporting;
  await Promise.race([agent.streamsDone, sleep(2_000)]); // output after exit from the agent's children is not awaited forever
  await watching;
  return agentCode;
}

/** The server ended the attempt: nothing more is sent. */
function endAttemptOver(d: Daemon, agentCode: number) {
  writeState(d.stateDir, 'final.json', { delivered: false, attempt_over: d.attemptOver, exit_codes: { agent: agentCode }, at_ms: Date.now() });
  return DAEMON_EXIT.attemptOver;
}

/** A stop came from outside (the runner's stop request or lifetime): the runner reports it. */
async function endStopped(d: Daemon, agentCode: number) {
  for (let i = 0; i < 3 && hasOutputToSend(d) && !d.attemptOver; i++) if (!(await sendBatch(d))) break;
  writeState(d.stateDir, 'final.json', { delivered: false, stopped: true, exit_codes: { agent: agentCode }, at_ms: Date.now() });
  return DAEMON_EXIT.stopped;
}
