// The in-sandbox daemon: `docket-runner daemon -- <agent command>`. It is the only process in the
// sandbox that holds a credential (the run-attempt token): it starts the agent without it, relays
// the agent's phases and output as batched reports (which are the attempt's heartbeats), and sends
// the final result with the patch. See runner-cli/README.md, "The agent's side".
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiError, classify, DocketClient, errorText, retryDelayMs } from './api.js';
import { Backoff } from './backoff.js';
import { sleep } from './procs.js';

export const PHASES = ['planning', 'implementing', 'verifying'];
/** `::phase implementing` on its own line (stdout or stderr) sets the phase. */
export const PHASE_LINE = /^::phase\s+(\S+)\s*$/;

/** Daemon exit codes. */
export const DAEMON_EXIT = { delivered: 0, undelivered: 1, usage: 2, attemptOver: 3, stopped: 143 };

/**
 * Limits, each overridable through the environment (DOCKET_DAEMON_*), for tests and odd agents.
 */
export function daemonLimits(env: Record<string, string | undefined>) {
  const int = (name: string, dflt: number) => {
    const n = Number(env[name]);
    return Number.isSafeInteger(n) && n > 0 ? n : dflt;
  };
  return {
    flushIntervalMs: int('DOCKET_DAEMON_FLUSH_MS', 1_000),
    heartbeatMs: int('DOCKET_DAEMON_HEARTBEAT_MS', 30_000),
    maxBatchLines: int('DOCKET_DAEMON_BATCH_LINES', 200),
    maxLineChars: int('DOCKET_DAEMON_LINE_CHARS', 4_000),
    maxBufferedLines: int('DOCKET_DAEMON_BUFFER_LINES', 10_000),
    maxPatchBytes: int('DOCKET_DAEMON_MAX_PATCH_BYTES', 4_900_000), // the server takes up to 5,000,000 characters
    finalTries: int('DOCKET_DAEMON_FINAL_TRIES', 8),
    stopGraceMs: int('DOCKET_DAEMON_STOP_GRACE_MS', 10_000),
    // How long an agent that died of a signal waits for the daemon's own stop signal (see runDaemon).
    stopSignalWaitMs: int('DOCKET_DAEMON_STOP_SIGNAL_WAIT_MS', 1_000),
    backoffBaseMs: int('DOCKET_DAEMON_BACKOFF_BASE_MS', 1_000),
    backoffMaxMs: int('DOCKET_DAEMON_BACKOFF_MAX_MS', 15_000),
  };
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
  outcome: string | null; error: string | null; problem: string | null;
} {
  const empty = { model: null, limitations: [], cost_cents: null, cost_uncertain: false, outcome: null, error: null, problem: null };
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
  return {
    model: typeof r.model === 'string' ? r.model.slice(0, 200) : null,
    limitations,
    cost_cents: cost,
    cost_uncertain: uncertain,
    outcome: r.outcome === 'failed' || r.outcome === 'completed' ? r.outcome : null,
    error: typeof r.error === 'string' ? r.error.slice(0, 2000) : null,
    problem: null,
  };
}

function run(cmd: string, args: string[], { cwd, env }: { cwd: string; env?: Record<string, string | undefined> }): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: env ?? process.env, maxBuffer: 256 * 1024 * 1024, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as any).code === 'number' ? (err as any).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** The commit checked out in `cwd`, or null outside a repository. */
export async function headRevision(cwd: string) {
  const r = await run('git', ['rev-parse', '--verify', '--quiet', 'HEAD'], { cwd });
  return r.code === 0 ? r.stdout.trim() : null;
}

/**
 * Everything the agent changed against the source revision, new files included (a throwaway
 * index, so the work tree's own index is untouched). Empty outside a repository.
 */
export async function computePatch(cwd: string, sourceRevision: string | null): Promise<{ patch: string; problem: string | null }> {
  if (!sourceRevision) return { patch: '', problem: null };
  const dir = mkdtempSync(join(tmpdir(), 'docket-index-'));
  const env = { ...process.env, GIT_INDEX_FILE: join(dir, 'index') };
  try {
    const add = await run('git', ['add', '--all', '--force', '--', '.', ':!.git'], { cwd, env });
    if (add.code !== 0) {
      // --force adds ignored files too; fall back to the plain rule when that fails.
      const plain = await run('git', ['add', '--all'], { cwd, env });
      if (plain.code !== 0) return { patch: '', problem: `git add failed: ${plain.stderr.trim().slice(0, 500)}` };
    }
    const diff = await run('git', ['-c', 'core.quotepath=off', 'diff', '--cached', '--binary', '--no-color', '--no-ext-diff', sourceRevision], { cwd, env });
    if (diff.code !== 0) return { patch: '', problem: `git diff failed: ${diff.stderr.trim().slice(0, 500)}` };
    return { patch: diff.stdout, problem: null };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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

/**
 * @param command the agent's argv
 * @param opts.echo receives the agent's raw output (by default our stdout, which the launcher sends to sandbox.log)
 * @returns the daemon's exit code
 */
export async function runDaemon(command: string[], { env = process.env, cwd = process.cwd(), log = (s) => process.stderr.write(s + '\n'), echo = (c) => process.stdout.write(c) }: { env?: Record<string, string | undefined>; cwd?: string; log?: (s: string) => void; echo?: (chunk: string) => void } = {}): Promise<number> {
  const stateDir = env.DOCKET_STATE_DIR;
  const missing = ['DOCKET_URL', 'DOCKET_RUN_ID', 'DOCKET_ATTEMPT', 'DOCKET_ATTEMPT_TOKEN'].filter((k) => !env[k]);
  if (command.length === 0 || missing.length > 0) {
    const why = command.length === 0 ? 'no agent command after --' : `missing ${missing.join(', ')}`;
    log(`docket-runner daemon: ${why}`);
    writeState(stateDir, 'launch.json', { ok: false, error: `daemon: ${why}` });
    return DAEMON_EXIT.usage;
  }
  const limits = daemonLimits(env);
  const runId = env.DOCKET_RUN_ID as string;
  const client = new DocketClient({ serverUrl: (env.DOCKET_URL as string), token: env.DOCKET_ATTEMPT_TOKEN, timeoutMs: 30_000 });
  const sourceRevision = env.DOCKET_SOURCE_REVISION || (await headRevision(cwd));

  // The agent gets everything but the credential and the daemon's own plumbing.
  const agentEnv = { ...env };
  delete agentEnv.DOCKET_ATTEMPT_TOKEN;
  delete agentEnv.DOCKET_STATE_DIR;
  for (const k of Object.keys(agentEnv)) if (k.startsWith('DOCKET_DAEMON_')) delete agentEnv[k];

  const buffer = new ReportBuffer(limits);
  let stopping = false;
  let attemptOver: string | null = null;
  let linesSent = 0;

  const child = spawn(command[0], command.slice(1), { cwd, env: agentEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const started = await new Promise((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', (e) => resolve(e));
  });
  if (started) {
    const e = started as any;
    const error = e.code === 'ENOENT' ? `agent command not found: ${command[0]}` : `agent command failed to start: ${e.message}`;
    log(`docket-runner daemon: ${error}`);
    writeState(stateDir, 'launch.json', { ok: false, error });
    return DAEMON_EXIT.usage;
  }
  writeState(stateDir, 'launch.json', { ok: true, agent_pid: child.pid, source_revision: sourceRevision, at_ms: Date.now() });
  const agentExit = new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });

  const onLine = (line: string) => {
    const m = PHASE_LINE.exec(line);
    if (m && PHASES.includes(m[1])) {
      buffer.setPhase(m[1]);
      writeState(stateDir, 'status.json', { phase: m[1], at_ms: Date.now() });
      return;
    }
    buffer.push(line);
  };
  const streamsDone = Promise.all([pipeLines(child.stdout, onLine, echo), pipeLines(child.stderr, onLine, echo)]);

  const stopAgent = async (why: string) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    log(`docket-runner daemon: stopping the agent: ${why}`);
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), limits.stopGraceMs);
    await agentExit;
    clearTimeout(t);
  };
  let signalled = () => {};
  const stopSignal = new Promise<void>((resolve) => (signalled = resolve));
  const onSignal = (sig: NodeJS.Signals) => {
    stopping = true;
    signalled();
    void stopAgent(`received ${sig}`);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const reports = new ReportSequence();
  /** The last failed report's error, so the retry waits at least its Retry-After. */
  let lastFailure: unknown = null;
  /** The report in flight, or the next batch; returns false when it must be retried later. */
  const sendBatch = async () => {
    const body = reports.current(buffer);
    try {
      await client.report(runId, body);
      reports.answered();
      linesSent += body.lines.length;
      return true;
    } catch (e) {
      lastFailure = e;
      const kind = classify(e);
      if (kind === 'definitive' || kind === 'attempt_over') attemptOver = (e as ApiError).code;
      else if (reports.refused(e)) {
        log(`docket-runner daemon: report ${body.seq} dropped: ${errorText(e)}`);
        return true;
      } else log(`docket-runner daemon: report ${body.seq} failed (${errorText(e)}); will retry it`);
      return false;
    }
  };

  // The report loop: output as it comes (batched), and a heartbeat when there is none.
  // Loops stop at the agent's exit; the output still in flight is flushed before the final report.
  let agentExited = false;
  agentExit.then(() => (agentExited = true));
  const backoff = new Backoff({ baseMs: limits.backoffBaseMs, maxMs: limits.backoffMaxMs });
  const reportLoop = (async () => {
    let lastSentAt = 0;
    while (!agentExited && !attemptOver) {
      const due = reports.inFlight || buffer.hasNews || Date.now() - lastSentAt >= limits.heartbeatMs;
      if (due) {
        const ok = await sendBatch();
        if (ok) {
          backoff.succeed();
          lastSentAt = Date.now();
          if (!buffer.hasNews) await Promise.race([sleep(limits.flushIntervalMs), agentExit]);
        } else if (!attemptOver) {
          await Promise.race([sleep(retryDelayMs(lastFailure, backoff.fail())), agentExit]);
        }
      } else {
        await Promise.race([sleep(limits.flushIntervalMs), agentExit]);
      }
    }
  })();

  const attemptWatch = (async () => {
    while (!agentExited) {
      if (attemptOver) {
        await stopAgent(`the server answered ${attemptOver}: this attempt is over`);
        return;
      }
      await Promise.race([sleep(200), agentExit]);
    }
  })();

  const exit = await agentExit as { code: number | null, signal: NodeJS.Signals | null };
  const agentCode = exit.code ?? 128 + signalNumber(exit.signal);
  // A stop from outside signals the whole sandbox at once: the agent's exit can be seen before the
  // daemon's own signal, so an agent that died of a signal waits briefly for it (bounded).
  if (agentCode > 128 && !stopping) await Promise.race([stopSignal, sleep(limits.stopSignalWaitMs)]);
  await reportLoop;
  await Promise.race([streamsDone, sleep(2_000)]); // output after exit from the agent's children is not awaited forever
  await attemptWatch;

  if (attemptOver) {
    writeState(stateDir, 'final.json', { delivered: false, attempt_over: attemptOver, exit_codes: { agent: agentCode }, at_ms: Date.now() });
    return DAEMON_EXIT.attemptOver;
  }
  if (stopping) {
    // A stop came from outside (the runner's stop request or lifetime): the runner reports it.
    for (let i = 0; i < 3 && (reports.inFlight || buffer.hasNews) && !attemptOver; i++) if (!(await sendBatch())) break;
    writeState(stateDir, 'final.json', { delivered: false, stopped: true, exit_codes: { agent: agentCode }, at_ms: Date.now() });
    return DAEMON_EXIT.stopped;
  }

  // The final result.
  const result = readResultFile(env.DOCKET_RESULT_FILE);
  const { patch, problem: patchProblem } = await computePatch(cwd, sourceRevision);
  const limitations = [...result.limitations];
  let sentPatch = patch;
  if (Buffer.byteLength(patch) > limits.maxPatchBytes) {
    limitations.push(`the patch (${Buffer.byteLength(patch)} bytes) exceeded the ${limits.maxPatchBytes}-byte limit and was left out`);
    sentPatch = '';
  }
  if (patchProblem) limitations.push(`the patch could not be computed: ${patchProblem}`);
  if (result.problem) limitations.push(result.problem);
  const failed = agentCode !== 0 || result.outcome === 'failed';
  const final = {
    outcome: failed ? 'failed' : 'completed',
    ...(failed ? { error: result.error ?? (agentCode !== 0 ? `the agent exited with code ${agentCode}` : 'the agent reported failure') } : {}),
    exit_codes: { agent: agentCode },
    artifact: { patch: sentPatch, source_revision: sourceRevision, model: result.model, limitations: limitations.slice(0, 100) },
    cost_cents: result.cost_cents,
  };

  // Remaining output first (bounded), then the final report with the last batch.
  const flushBackoff = new Backoff({ baseMs: limits.backoffBaseMs, maxMs: limits.backoffMaxMs });
  for (let i = 0, failures = 0; i < 1_000 && (reports.inFlight || buffer.hasNews) && !attemptOver && failures < limits.finalTries; i++) {
    if (!(await sendBatch())) {
      failures += 1;
      await sleep(retryDelayMs(lastFailure, flushBackoff.fail()));
    }
  }
  let delivered = false;
  let answerState: string | null = null;
  let lastError = '';
  const finalBackoff = new Backoff({ baseMs: limits.backoffBaseMs, maxMs: limits.backoffMaxMs });
  // A progress report still in flight goes first, with its own seq; the final report follows it.
  for (let tryNo = 1; tryNo <= limits.finalTries && !delivered && !attemptOver; ) {
    const body = reports.current(buffer, { final });
    try {
      const res = await client.report(runId, body);
      reports.answered();
      if (body.final) {
        delivered = true;
        answerState = res.body?.state ?? null;
      }
    } catch (e) {
      lastError = errorText(e);
      const kind = classify(e);
      if (kind === 'definitive' || kind === 'attempt_over') {
        attemptOver = (e as ApiError).code;
        break;
      }
      if (body.final && e instanceof ApiError && (e.status === 400 || e.status === 413) && final.artifact.patch) {
        // The server refused the body (so the seq is still free): keep the result, leave the patch out and say so.
        final.artifact = { ...final.artifact, patch: '', limitations: [...limitations, `the server refused the patch: ${e.message}`] };
        continue;
      }
      reports.refused(e);
      log(`docket-runner daemon: final report failed (${lastError}); try ${tryNo} of ${limits.finalTries}`);
      if (tryNo < limits.finalTries) await sleep(retryDelayMs(e, finalBackoff.fail()));
      tryNo += 1;
    }
  }
  writeState(stateDir, 'final.json', {
    delivered,
    outcome: final.outcome,
    exit_codes: final.exit_codes,
    cost_cents: final.cost_cents,
    cost_uncertain: result.cost_uncertain,
    answer_state: answerState,
    attempt_over: attemptOver,
    error: delivered ? null : lastError || attemptOver,
    lines_sent: linesSent,
    at_ms: Date.now(),
  });
  process.off('SIGTERM', onSignal);
  process.off('SIGINT', onSignal);
  if (delivered) return DAEMON_EXIT.delivered;
  return attemptOver ? DAEMON_EXIT.attemptOver : DAEMON_EXIT.undelivered;
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
