// The result: the agent ended on its own, so its result file, its exit code and its work as a
// patch make the final report, sent after the rest of its output (docs/protocol.md, "Daemon reports").
import { ApiError, errorText, retryDelayMs } from '../api.js';
import { computePatch } from '../patch.js';
import { sleep } from '../procs.js';
import { attemptEnded, type Daemon, deliveryRecord, endsAttempt, exitCodeAfter, reportBackoff } from './attempt.js';
import { DAEMON_EXIT } from './limits.js';
import { flushOutput } from './report-loop.js';
import { readAgentJsonObject, writeState } from './sandbox-files.js';

/** The server's default blocker bounds (BLOCKER_TEXT_MAX_CHARS, BLOCKER_ITEMS_MAX); a longer blocker is cut to them. */
const BLOCKER_TEXT_MAX_CHARS = 4_000;
const BLOCKER_ITEMS_MAX = 20;

/**
 * Read the agent's result file (DOCKET_RESULT_FILE). Missing is fine; a broken one is reported.
 */
export function readResultFile(path: string | undefined): {
  model: string | null; limitations: string[]; cost_cents: number | null; cost_uncertain: boolean;
  outcome: string | null; error: string | null; problem: string | null; blocker: Blocker | null;
} {
  const empty = { model: null, limitations: [], cost_cents: null, cost_uncertain: false, outcome: null, error: null, problem: null, blocker: null };
  if (!path) return empty;
  const read = readAgentJsonObject(path);
  if ('missing' in read) return empty;
  if ('broken' in read) return { ...empty, cost_uncertain: true, problem: `the result file is not a JSON object: ${read.broken}` };
  const r = read.object;
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

/** The body's `final` in the last report (docs/protocol.md, "Daemon reports (run-attempt token)"). */
type FinalResult = {
  outcome: 'failed' | 'completed' | 'blocked';
  error?: string;
  blocker?: Blocker;
  exit_codes: { agent: number };
  artifact: { patch: string; source_revision: string | null; model: string | null; limitations: string[] };
  cost_cents: number | null;
};

/** The agent ended on its own: send the rest of its output, then its result and patch. */
export async function deliverResult(d: Daemon, agentCode: number, cwd: string, resultFile: string | undefined) {
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
    ...deliveryRecord(d, sent),
    lines_sent: d.linesSent,
    at_ms: Date.now(),
  });
  return exitCodeAfter(d, sent.delivered, DAEMON_EXIT.delivered);
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

/**
 * The final report, retried up to finalTries. A progress report still in flight goes first, with
 * its own seq; the final report follows it.
 */
async function sendFinalReport(d: Daemon, final: FinalResult, limitations: string[]) {
  let delivered = false;
  let answerState: string | null = null;
  let lastError = '';
  const backoff = reportBackoff(d);
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
