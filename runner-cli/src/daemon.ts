// The in-sandbox daemon: `docket-runner daemon -- <agent command>`. It is the only process in the
// sandbox that holds a credential (the run-attempt token): it starts the agent without it, relays
// the agent's phases and output as batched reports (which are the attempt's heartbeats), and sends
// the final result with the patch. See runner-cli/README.md, "The agent's side".
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiError, classify, DocketClient, errorText, retryDelayMs } from './api.js';
import { Backoff } from './backoff.js';
import { computePatch, headRevision } from './patch.js';
import { groupAlive, signalGroup, sleep } from './procs.js';

export const PHASES = ['planning', 'implementing', 'verifying'];
/** `::phase implementing` on its own line (stdout or stderr) sets the phase. */
export const PHASE_LINE = /^::phase\s+(\S+)\s*$/;

/** The server's default blocker bounds (BLOCKER_TEXT_MAX_CHARS, BLOCKER_ITEMS_MAX); a longer blocker is cut to them. */
const BLOCKER_TEXT_MAX_CHARS = 4_000;
const BLOCKER_ITEMS_MAX = 20;

/** Daemon exit codes. */
export const DAEMON_EXIT = { delivered: 0, undelivered: 1, usage: 2, attemptOver: 3, paused: 4, stopped: 143 };

/**
 * Limits, each overridable through the environment (DOCKET_DAEMON_*), for tests and odd agents:
 * the variable, its default and what it bounds (`docket-runner daemon --help` lists them).
 */
const DAEMON_LIMITS = {
  flushIntervalMs: { env: 'DOCKET_DAEMON_FLUSH_MS', default: 1_000, help: 'how often buffered output is sent' },
  heartbeatMs: { env: 'DOCKET_DAEMON_HEARTBEAT_MS', default: 30_000, help: 'a report at least this often while the agent is silent' },
  maxBatchLines: { env: 'DOCKET_DAEMON_BATCH_LINES', default: 200, help: 'output lines per report' },
  maxLineChars: { env: 'DOCKET_DAEMON_LINE_CHARS', default: 4_000, help: 'a longer output line is cut' },
  maxBufferedLines: { env: 'DOCKET_DAEMON_BUFFER_LINES', default: 10_000, help: 'lines kept while the server is away; older ones are dropped with a note' },
  // The server takes up to 5,000,000 characters.
  maxPatchBytes: { env: 'DOCKET_DAEMON_MAX_PATCH_BYTES', default: 4_900_000, help: 'a larger patch is left out of the final report, saying so' },
  finalTries: { env: 'DOCKET_DAEMON_FINAL_TRIES', default: 8, help: 'tries of the final report and of the checkpoint' },
  stopGraceMs: { env: 'DOCKET_DAEMON_STOP_GRACE_MS', default: 10_000, help: "SIGTERM to SIGKILL when stopping the agent's process group" },
  checkpointGraceMs: { env: 'DOCKET_DAEMON_CHECKPOINT_GRACE_MS', default: 60_000, help: 'time an agent asked to checkpoint (SIGUSR1) gets to write it and exit' },
  // See superviseAgent.
  stopSignalWaitMs: { env: 'DOCKET_DAEMON_STOP_SIGNAL_WAIT_MS', default: 1_000, help: "how long an agent that died of a signal waits for the daemon's own stop signal" },
  backoffBaseMs: { env: 'DOCKET_DAEMON_BACKOFF_BASE_MS', default: 1_000, help: 'first retry delay of a report (doubles, with jitter)' },
  backoffMaxMs: { env: 'DOCKET_DAEMON_BACKOFF_MAX_MS', default: 15_000, help: 'longest retry delay of a report' },
} as const;

/** The limits from the environment; a value that is not a positive integer keeps its default. */
export function daemonLimits(env: Record<string, string | undefined>) {
  const limits = {} as { -readonly [K in keyof typeof DAEMON_LIMITS]: number };
  for (const [key, spec] of Object.entries(DAEMON_LIMITS) as [keyof typeof DAEMON_LIMITS, (typeof DAEMON_LIMITS)[keyof typeof DAEMON_LIMITS]][]) {
    const n = Number(env[spec.env]);
    limits[key] = Number.isSafeInteger(n) && n > 0 ? n : spec.default;
  }
  return limits;
}

/** Help lines for the DOCKET_DAEMON_* variables, with their defaults. */
export function daemonLimitsHelp() {
  return Object.values(DAEMON_LIMITS).map((s) => `  ${s.env.padEnd(36)} ${s.help}; default ${s.default}`).join('\n');
}

/**
 * Buffers output lines and phase changes in order, and hands out bounded batches: a batch is at
 * most one phase change followed by lines, so the server sees every phase and every line in the
 * order the agent printed them. Pure bookkeeping.
 */
type ReportItem = { line: string } | { phase: string };
type ReportLimits = { maxBatchLines: number; maxLineChars: number; maxBufferedLines: number };
/** One report body as sent, kept until it is answered. */
type PendingReport = { seq: number; lines: string[]; phase?: string; final?: any };

export class ReportBuffer {
  limits: ReportLimits;
  items: ReportItem[];
  dropped: number;
  /** The last phase queued. */
  phase: string | null;
  constructor(limits: ReportLimits) {
    this.limits = limits;
    this.items = [];
    this.dropped = 0;
    this.phase = null;
  }
  push(line: string) {
    const max = this.limits.maxLineChars;
    this.items.push({ line: line.length > max ? line.slice(0, max) + '…' : line });
    this.#bound();
  }
  setPhase(phase: string) {
    if (phase === this.phase) return;
    this.phase = phase;
    this.items.push({ phase });
    this.#bound();
  }
  get hasNews() {
    return this.items.length > 0 || this.dropped > 0;
  }
  get pendingLines() {
    return this.items.filter((i) => 'line' in i).length;
  }
  /**
   * Remove the next batch from the buffer. Hand it back with giveBack() if it was not delivered.
   */
  take(): { body: { lines: string[]; phase?: string }; batch: { items: Array<{ line: string }|{ phase: string }>; dropped: number } } {
    const body: { lines: string[]; phase?: string } = { lines: [] };
    let n = 0;
    const first = this.items[0];
    if (first && 'phase' in first) {
      body.phase = first.phase;
      n = 1;
    }
    while (n < this.items.length && body.lines.length < this.limits.maxBatchLines) {
      const item = this.items[n];
      if ('phase' in item) break;
      body.lines.push(item.line);
      n += 1;
    }
    const dropped = this.dropped;
    if (dropped > 0) body.lines.unshift(`[docket-runner daemon: ${dropped} output lines were dropped while the server was unreachable]`);
    this.dropped = 0;
    return { body, batch: { items: this.items.splice(0, n), dropped } };
  }
  giveBack(batch: { items: Array<{ line: string }|{ phase: string }>; dropped: number }) {
    this.items.unshift(...batch.items);
    this.dropped += batch.dropped;
    this.#bound();
  }
  /** The server has been unreachable for long: keep the newest lines, and every phase change. */
  #bound() {
    let excess = this.items.length - this.limits.maxBufferedLines;
    for (let i = 0; excess > 0 && i < this.items.length; ) {
      if ('line' in this.items[i]) {
        this.items.splice(i, 1);
        this.dropped += 1;
        excess -= 1;
      } else i += 1;
    }
  }
}

/**
 * Numbers the attempt's reports 1, 2, … and holds the one in flight: until it is answered, every
 * retry sends the same body with the same seq, so a report whose answer was lost is applied once
 * and a final report accepted before its answer was lost is answered as a success again
 * (docs/protocol.md, "Daemon reports").
 */
export class ReportSequence {
  nextSeq: number;
  pending: PendingReport | null;
  constructor() {
    this.nextSeq = 1;
    this.pending = null;
  }
  get inFlight() {
    return this.pending !== null;
  }
  /**
   * The report to send now: the one in flight, or the buffer's next batch under the next seq.
   * @param extra added to a new report only
   */
  current(buffer: ReportBuffer, extra: { final?: any } = {}): PendingReport {
    if (!this.pending) this.pending = { seq: this.nextSeq, ...buffer.take().body, ...extra };
    return this.pending;
  }
  /** The server took it: the next report gets the next seq. */
  answered() {
    this.pending = null;
    this.nextSeq += 1;
  }
  /**
   * A refusal no retry can change (a bad body, or a seq the server is already past): the report
   * is dropped so the next one can go. Returns whether it was dropped.
   */
  refused(err: unknown) {
    if (!(err instanceof ApiError)) return false;
    if (err.code === 'stale_report' && Number.isSafeInteger(err.body?.last_report_seq)) {
      this.pending = null;
      this.nextSeq = Math.max(this.nextSeq, err.body.last_report_seq) + 1;
      return true;
    }
    if (err.status === 400 || err.status === 413) {
      this.answered();
      return true;
    }
    return false;
  }
}

/**
 * Read the agent's result file (DOCKET_RESULT_FILE). Missing is fine; a broken one is reported.
 */
export function readResultFile(path: string | undefined): {
  model: string | null; limitations: string[]; cost_cents: number | null; cost_uncertain: boolean;
  outcome: string | null; error: string | null; problem: string | null; blocker: Blocker | null;
} {
  const empty = { model: null, limitations: [], cost_cents: null, cost_uncertain: false, outcome: null, error: null, problem: null, blocker: null };
  if (!path) return empty;
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return empty;
  }
  let r;
  try {
    r = JSON.parse(text);
    if (!r || typeof r !== 'object' || Array.isArray(r)) throw new Error('not an object');
  } catch (e) {
    return { ...empty, cost_uncertain: true, problem: `the result file is not a JSON object: ${errorText(e)}` };
  }
  const limitations = Array.isArray(r.limitations) ? r.limitations.filter((x: unknown): x is string => typeof x === 'string').slice(0, 50).map((x: string) => x.slice(0, 2_000)) : [];
  let cost = null;
  let uncertain = r.cost_uncertain === true;
  if (r.cost_cents !== undefined && r.cost_cents !== null) {
    if (Number.isSafeInteger(r.cost_cents) && r.cost_cents >= 0) cost = r.cost_cents;
    else uncertain = true;
  }
  const blocked = r.outcome === 'blocked' ? readBlocker(r.blocker) : null;
  return {
    model: typeof r.model === 'string' ? r.model.slice(0, 200) : null,
    limitations,
    cost_cents: cost,
    cost_uncertain: uncertain,
    // A blocked outcome without a usable blocker is a failure that says why.
    outcome: r.outcome === 'failed' || r.outcome === 'completed' ? r.outcome : r.outcome === 'blocked' ? (blocked?.blocker ? 'blocked' : 'failed') : null,
    error: blocked?.problem ?? (typeof r.error === 'string' ? r.error.slice(0, 2000) : null),
    problem: null,
    blocker: blocked?.blocker ?? null,
  };
}

/** What the agent reports when it needs a person (docs/protocol.md, "Blockers"). */
export type Blocker = { summary: string; evidence: string[]; questions: string[]; human_action: string };

/**
 * The result file's `blocker`, cut to the server's default bounds (BLOCKER_TEXT_MAX_CHARS,
 * BLOCKER_ITEMS_MAX), or why it cannot be used: a blocker needs a summary and a human action.
 */
export function readBlocker(raw: unknown): { blocker: Blocker | null; problem: string | null } {
  const b = raw as Record<string, unknown> | null;
  const text = (v: unknown) => (typeof v === 'string' ? v.trim().slice(0, BLOCKER_TEXT_MAX_CHARS) : '');
  const list = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x.trim() !== '').slice(0, BLOCKER_ITEMS_MAX).map(text) : []);
  if (!b || typeof b !== 'object' || Array.isArray(b)) return { blocker: null, problem: 'the agent reported outcome "blocked" without a blocker object' };
  const blocker = { summary: text(b.summary), evidence: list(b.evidence), questions: list(b.questions), human_action: text(b.human_action) };
  if (!blocker.summary || !blocker.human_action) {
    return { blocker: null, problem: 'the agent reported outcome "blocked" but its blocker lacks a summary or a human_action' };
  }
  return { blocker, problem: null };
}

function writeState(dir: string | undefined, name: string, data: any) {
  if (!dir) return;
  try {
    const path = join(dir, name);
    writeFileSync(`${path}.tmp`, JSON.stringify(data) + '\n');
    renameSync(`${path}.tmp`, path);
  } catch {
    // the state dir is a courtesy to the runner; reports are what counts
  }
}

type AgentExit = { code: number | null; signal: NodeJS.Signals | null };

/** The body's `final` in the last report (docs/protocol.md, "Daemon reports (run-attempt token)"). */
type FinalResult = {
  outcome: 'failed' | 'completed' | 'blocked';
  error?: string;
  blocker?: Blocker;
  exit_codes: { agent: number };
  artifact: { patch: string; source_revision: string | null; model: string | null; limitations: string[] };
  cost_cents: number | null;
};

/**
 * What the daemon's phases share: the attempt it speaks for, its reports, and what has happened
 * so far. The report loop, the attempt watch and the signal handler run side by side and tell
 * each other through it (attemptOver, stopping).
 */
type Daemon = {
  runId: string;
  attempt: number;
  client: DocketClient;
  limits: ReturnType<typeof daemonLimits>;
  stateDir: string | undefined;
  log: (s: string) => void;
  sourceRevision: string | null;
  buffer: ReportBuffer;
  reports: ReportSequence;
  /** The last failed report's error, so the retry waits at least its Retry-After. */
  lastFailure: unknown;
  linesSent: number;
  /** The code of the answer that ended this attempt; once set, nothing more is sent. */
  attemptOver: string | null;
  /** A stop signal came from outside (the runner's stop request or lifetime). */
  stopping: boolean;
  /** The runner asked for a checkpoint (SIGUSR1): the run is pausing. */
  pausing: boolean;
  /** Why the checkpoint is partial (the agent ignored the request), or null. */
  checkpointNote: string | null;
};

/** The running agent: its process, its exit (and whether it came), and the end of its output. */
type Agent = { child: ChildProcess; exit: Promise<AgentExit>; exited: boolean; streamsDone: Promise<unknown> };

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

// --- Start-up and launch ---

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

/** The attempt's client, limits and source revision, with nothing reported yet. */
async function startDaemon(env: Record<string, string | undefined>, cwd: string, log: (s: string) => void): Promise<Daemon> {
  const limits = daemonLimits(env);
  return {
    runId: env.DOCKET_RUN_ID as string,
    attempt: Number(env.DOCKET_ATTEMPT),
    client: new DocketClient({ serverUrl: env.DOCKET_URL as string, token: env.DOCKET_ATTEMPT_TOKEN, timeoutMs: 30_000 }),
    limits,
    stateDir: env.DOCKET_STATE_DIR,
    log,
    sourceRevision: env.DOCKET_SOURCE_REVISION || (await headRevision(cwd)),
    buffer: new ReportBuffer(limits),
    reports: new ReportSequence(),
    lastFailure: null,
    linesSent: 0,
    attemptOver: null,
    stopping: false,
    pausing: false,
    checkpointNote: null,
  };
}

/** The agent gets everything but the credential and the daemon's own plumbing. */
function agentEnvironment(env: Record<string, string | undefined>) {
  const agentEnv = { ...env };
  delete agentEnv.DOCKET_ATTEMPT_TOKEN;
  delete agentEnv.DOCKET_STATE_DIR;
  for (const k of Object.keys(agentEnv)) if (k.startsWith('DOCKET_DAEMON_')) delete agentEnv[k];
  return agentEnv;
}

/** Start the agent; resolves once it runs, or with why it could not start. */
async function spawnAgent(command: string[], cwd: string, env: Record<string, string | undefined>): Promise<{ child: ChildProcess } | { error: string }> {
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
function followAgent(d: Daemon, child: ChildProcess, echo: (chunk: string) => void): Agent {
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

/** `::phase <name>` sets the phase; any other line is output to report. */
function relayLine(d: Daemon, line: string) {
  const m = PHASE_LINE.exec(line);
  if (m && PHASES.includes(m[1])) {
    d.buffer.setPhase(m[1]);
    writeState(d.stateDir, 'status.json', { phase: m[1], at_ms: Date.now() });
    return;
  }
  d.buffer.push(line);
}

// --- While the agent runs ---

/**
 * SIGTERM or SIGINT (the runner's stop request or lifetime) stops the agent; the runner reports the
 * stop. SIGUSR1 (the runner's pause) asks the agent to checkpoint.
 */
function stopOnSignals(d: Daemon, agent: Agent) {
  let signalled = () => {};
  const received = new Promise<void>((resolve) => (signalled = resolve));
  const onSignal = (sig: NodeJS.Signals) => {
    d.stopping = true;
    signalled();
    void stopAgent(d, agent, `received ${sig}`);
  };
  const onPause = () => void askAgentToCheckpoint(d, agent);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGUSR1', onPause);
  const remove = () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    process.off('SIGUSR1', onPause);
  };
  return { received, remove };
}

/** SIGTERM to the agent's process group, then SIGKILL after the grace period; resolves at the agent's exit. */
async function stopAgent(d: Daemon, agent: Agent, why: string) {
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
async function settleAgentGroup(d: Daemon, agent: Agent) {
  const pgid = agent.child.pid as number;
  const deadline = Date.now() + d.limits.stopGraceMs;
  while (groupAlive(pgid) && Date.now() < deadline) await sleep(100);
  if (!groupAlive(pgid)) return;
  d.log("docket-runner daemon: the agent's child processes outlived it; stopping them");
  signalGroup(pgid, 'SIGKILL');
  for (let i = 0; i < 50 && groupAlive(pgid); i++) await sleep(100);
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

/**
 * Output as it comes (batched), and a heartbeat when there is none, until the agent exits or the
 * attempt is over; the output still in flight is flushed before the final report. The first
 * heartbeat is due one interval after the start: the runner's `launched` call already told the
 * server the sandbox runs, so a short silent run sends no report but its final one (or none, when
 * it is stopped).
 */
async function reportWhileRunning(d: Daemon, agent: Agent) {
  const backoff = new Backoff({ baseMs: d.limits.backoffBaseMs, maxMs: d.limits.backoffMaxMs });
  let lastSentAt = Date.now();
  while (!agent.exited && !d.attemptOver) {
    const due = hasOutputToSend(d) || Date.now() - lastSentAt >= d.limits.heartbeatMs;
    if (due) {
      const ok = await sendBatch(d);
      if (ok) {
        backoff.succeed();
        lastSentAt = Date.now();
        if (!d.buffer.hasNews) await Promise.race([sleep(d.limits.flushIntervalMs), agent.exit]);
      } else if (!d.attemptOver) {
        await Promise.race([sleep(retryDelayMs(d.lastFailure, backoff.fail())), agent.exit]);
      }
    } else {
      await Promise.race([sleep(d.limits.flushIntervalMs), agent.exit]);
    }
  }
}

/** An answer that ended the attempt stops the agent: nothing it does can be delivered any more. */
async function stopWhenAttemptOver(d: Daemon, agent: Agent) {
  while (!agent.exited) {
    if (d.attemptOver) {
      await stopAgent(d, agent, `the server answered ${d.attemptOver}: this attempt is over`);
      return;
    }
    await Promise.race([sleep(200), agent.exit]);
  }
}

function hasOutputToSend(d: Daemon) {
  return d.reports.inFlight || d.buffer.hasNews;
}

/**
 * Whether an error answer means this attempt can never report again. A 401 is one for the daemon:
 * its attempt token is fixed for the attempt, so a token refused now is refused on every retry.
 */
function endsAttempt(e: unknown) {
  const kind = classify(e);
  return kind === 'definitive' || kind === 'attempt_over' || (e instanceof ApiError && e.status === 401);
}

/** Nothing more is sent for this attempt: say why, once (the first answer that ended it). */
function attemptEnded(d: Daemon, e: unknown) {
  if (d.attemptOver) return;
  const err = e as ApiError;
  d.attemptOver = err.code;
  const why = err.status === 401 ? 'the attempt token was refused' : 'this attempt is over';
  d.log(`docket-runner daemon: the server answered ${err.status} ${err.code} (${err.message}): ${why}; nothing more is sent`);
}

/** The report in flight, or the next batch; returns false when it must be retried later. */
async function sendBatch(d: Daemon): Promise<boolean> {
  const body = d.reports.current(d.buffer);
  try {
    await d.client.report(d.runId, body);
    d.reports.answered();
    d.linesSent += body.lines.length;
    return true;
  } catch (e) {
    d.lastFailure = e;
    if (endsAttempt(e)) attemptEnded(d, e);
    else if (d.reports.refused(e)) {
      d.log(`docket-runner daemon: report ${body.seq} dropped: ${errorText(e)}`);
      return true;
    } else d.log(`docket-runner daemon: report ${body.seq} failed (${errorText(e)}); will retry it`);
    return false;
  }
}

// --- The end ---

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

/**
 * The agent and its children have exited after a pause: the rest of the output, then the
 * checkpoint (its file, the last phase, the work as a patch on the source revision). Only the
 * stored checkpoint pauses the run; the runner reads final.json to tell.
 */
async function endPaused(d: Daemon, agentCode: number, cwd: string, checkpointFile: string | undefined) {
  const file = readCheckpointFile(checkpointFile);
  const { patch, problem } = await computePatch(cwd, d.sourceRevision);
  const notes = [d.checkpointNote, file.problem, problem && `the patch could not be computed: ${problem}`].filter(Boolean);
  const body = {
    session_id: file.session_id,
    last_phase: file.last_phase ?? d.buffer.phase,
    pending_actions: file.pending_actions,
    session: file.session,
    patch,
    source_revision: d.sourceRevision,
    note: notes.length > 0 ? notes.join('; ').slice(0, 4_000) : null,
  };
  await flushOutput(d);
  const sent = await sendCheckpoint(d, body);
  writeState(d.stateDir, 'final.json', {
    delivered: false,
    checkpoint_delivered: sent.delivered,
    answer_state: sent.answerState,
    attempt_over: d.attemptOver,
    error: sent.delivered ? null : sent.lastError || d.attemptOver,
    exit_codes: { agent: agentCode },
    at_ms: Date.now(),
  });
  if (sent.delivered) return DAEMON_EXIT.paused;
  return d.attemptOver ? DAEMON_EXIT.attemptOver : DAEMON_EXIT.undelivered;
}

/** The agent's checkpoint file ($DOCKET_CHECKPOINT_FILE); missing or broken is a checkpoint without a session. */
export function readCheckpointFile(path: string | undefined): {
  session_id: string | null; last_phase: string | null; pending_actions: string[]; session: unknown; problem: string | null;
} {
  const none = { session_id: null, last_phase: null, pending_actions: [], session: null, problem: null };
  if (!path) return none;
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return { ...none, problem: 'the agent wrote no checkpoint file' };
  }
  let c;
  try {
    c = JSON.parse(text);
    if (!c || typeof c !== 'object' || Array.isArray(c)) throw new Error('not an object');
  } catch (e) {
    return { ...none, problem: `the checkpoint file is not a JSON object: ${errorText(e)}` };
  }
  const sessionId = typeof c.session_id === 'string' && c.session_id ? c.session_id.slice(0, 200) : null;
  const session = c.session ?? null;
  // A session named but not carried could never be resumed (the resume checks it is there): the
  // checkpoint keeps the work without the session, and its note says why.
  const unnamed = sessionId !== null && session === null;
  return {
    session_id: unnamed ? null : sessionId,
    last_phase: typeof c.last_phase === 'string' && c.last_phase ? c.last_phase.slice(0, 64) : null,
    pending_actions: Array.isArray(c.pending_actions) ? c.pending_actions.filter((x: unknown): x is string => typeof x === 'string').slice(0, 100).map((x: string) => x.slice(0, 2_000)) : [],
    session,
    problem: unnamed ? `the checkpoint file names session ${sessionId} but carries no "session"; stored without a session` : null,
  };
}

/** The checkpoint, retried up to finalTries on answers a retry can change. */
async function sendCheckpoint(d: Daemon, body: Parameters<DocketClient['checkpoint']>[2]) {
  const backoff = new Backoff({ baseMs: d.limits.backoffBaseMs, maxMs: d.limits.backoffMaxMs });
  let lastError = '';
  for (let tryNo = 1; tryNo <= d.limits.finalTries && !d.attemptOver; tryNo++) {
    try {
      const res = await d.client.checkpoint(d.runId, d.attempt, body);
      return { delivered: true, answerState: res.body?.state ?? null, lastError };
    } catch (e) {
      lastError = errorText(e);
      if (endsAttempt(e)) attemptEnded(d, e);
      else if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 429) break; // refused for good
      else {
        d.log(`docket-runner daemon: checkpoint failed (${lastError}); try ${tryNo} of ${d.limits.finalTries}`);
        if (tryNo < d.limits.finalTries) await sleep(retryDelayMs(e, backoff.fail()));
      }
    }
  }
  d.log(`docket-runner daemon: the checkpoint was not stored: ${lastError || d.attemptOver}`);
  return { delivered: false, answerState: null, lastError };
}

/** The agent ended on its own: send the rest of its output, then its result and patch. */
async function deliverResult(d: Daemon, agentCode: number, cwd: string, resultFile: string | undefined) {
  const { final, limitations, costUncertain } = await composeFinal(d, agentCode, cwd, resultFile);
  await flushOutput(d);
  const sent = await sendFinalReport(d, final, limitations);
  writeState(d.stateDir, 'final.json', {
    delivered: sent.delivered,
    outcome: final.outcome,
    exit_codes: final.exit_codes,
    cost_cents: final.cost_cents,
    cost_uncertain: costUncertain,
    answer_state: sent.answerState,
    attempt_over: d.attemptOver,
    error: sent.delivered ? null : sent.lastError || d.attemptOver,
    lines_sent: d.linesSent,
    at_ms: Date.now(),
  });
  if (sent.delivered) return DAEMON_EXIT.delivered;
  return d.attemptOver ? DAEMON_EXIT.attemptOver : DAEMON_EXIT.undelivered;
}

/**
 * The final result from the agent's exit code, its result file and the patch. `limitations` is
 * the full list, kept to say why a refused patch was left out.
 */
async function composeFinal(d: Daemon, agentCode: number, cwd: string, resultFile: string | undefined) {
  const result = readResultFile(resultFile);
  const { patch, problem: patchProblem } = await computePatch(cwd, d.sourceRevision);
  const limitations = [...result.limitations];
  let sentPatch = patch;
  if (Buffer.byteLength(patch) > d.limits.maxPatchBytes) {
    limitations.push(`the patch (${Buffer.byteLength(patch)} bytes) exceeded the ${d.limits.maxPatchBytes}-byte limit and was left out`);
    sentPatch = '';
  }
  if (patchProblem) limitations.push(`the patch could not be computed: ${patchProblem}`);
  if (result.problem) limitations.push(result.problem);
  // A blocker the agent wrote is its outcome whatever its exit code: it stopped to ask a person.
  const blocked = result.outcome === 'blocked' && result.blocker !== null;
  const failed = !blocked && (agentCode !== 0 || result.outcome === 'failed');
  const final: FinalResult = {
    outcome: blocked ? 'blocked' : failed ? 'failed' : 'completed',
    ...(blocked ? { blocker: result.blocker! } : {}),
    ...(failed ? { error: result.error ?? (agentCode !== 0 ? `the agent exited with code ${agentCode}` : 'the agent reported failure') } : {}),
    exit_codes: { agent: agentCode },
    artifact: { patch: sentPatch, source_revision: d.sourceRevision, model: result.model, limitations: limitations.slice(0, 100) },
    cost_cents: result.cost_cents,
  };
  return { final, limitations, costUncertain: result.cost_uncertain };
}

/** Output still buffered goes first, in bounded tries, so the final report carries only the last batch. */
async function flushOutput(d: Daemon) {
  const backoff = new Backoff({ baseMs: d.limits.backoffBaseMs, maxMs: d.limits.backoffMaxMs });
  for (let i = 0, failures = 0; i < 1_000 && hasOutputToSend(d) && !d.attemptOver && failures < d.limits.finalTries; i++) {
    if (!(await sendBatch(d))) {
      failures += 1;
      await sleep(retryDelayMs(d.lastFailure, backoff.fail()));
    }
  }
}

/**
 * The final report, retried up to finalTries. A progress report still in flight goes first, with
 * its own seq; the final report follows it.
 */
async function sendFinalReport(d: Daemon, final: FinalResult, limitations: string[]) {
  let delivered = false;
  let answerState: string | null = null;
  let lastError = '';
  const backoff = new Backoff({ baseMs: d.limits.backoffBaseMs, maxMs: d.limits.backoffMaxMs });
  for (let tryNo = 1; tryNo <= d.limits.finalTries && !delivered && !d.attemptOver; ) {
    const body = d.reports.current(d.buffer, { final });
    try {
      const res = await d.client.report(d.runId, body);
      d.reports.answered();
      if (body.final) {
        delivered = true;
        answerState = res.body?.state ?? null;
      }
    } catch (e) {
      lastError = errorText(e);
      if (endsAttempt(e)) {
        attemptEnded(d, e);
        break;
      }
      if (body.final && e instanceof ApiError && (e.status === 400 || e.status === 413) && final.artifact.patch) {
        // The server refused the body (so the seq is still free): keep the result, leave the patch out and say so.
        final.artifact = { ...final.artifact, patch: '', limitations: [...limitations, `the server refused the patch: ${e.message}`] };
        continue;
      }
      d.reports.refused(e);
      d.log(`docket-runner daemon: final report failed (${lastError}); try ${tryNo} of ${d.limits.finalTries}`);
      if (tryNo < d.limits.finalTries) await sleep(retryDelayMs(e, backoff.fail()));
      tryNo += 1;
    }
  }
  return { delivered, answerState, lastError };
}

/**
 * Split a stream into lines, passing the text through to `echo`.
 */
function pipeLines(stream: NodeJS.ReadableStream | null, onLine: (line: string) => void, echo: (chunk: string) => void) {
  return new Promise((resolve) => {
    if (!stream) return resolve(undefined);
    let rest = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      echo(chunk);
      rest += chunk;
      let i;
      while ((i = rest.indexOf('\n')) >= 0) {
        onLine(rest.slice(0, i).replace(/\r$/, ''));
        rest = rest.slice(i + 1);
      }
      if (rest.length > 64 * 1024) {
        onLine(rest);
        rest = '';
      }
    });
    stream.on('end', () => {
      if (rest) onLine(rest);
      resolve(undefined);
    });
    stream.on('error', () => resolve(undefined));
  });
}

function signalNumber(sig: NodeJS.Signals | null) {
  const nums = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15, SIGPIPE: 13, SIGABRT: 6, SIGSEGV: 11 } as Record<string, number>;
  return sig ? (nums[sig] ?? 0) : 0;
}
