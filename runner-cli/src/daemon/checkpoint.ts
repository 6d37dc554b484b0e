// The checkpoint: after a pause the agent has written its checkpoint file and exited, so the file,
// the last phase and the work as a patch are stored as the run's checkpoint (docs/protocol.md,
// "Pause and resume"). Only the stored checkpoint pauses the run.
import { ApiError, type DocketClient, errorText, retryDelayMs } from '../api.js';
import { computePatch } from '../patch.js';
import { sleep } from '../procs.js';
import { attemptEnded, type Daemon, deliveryRecord, endsAttempt, exitCodeAfter, reportBackoff } from './attempt.js';
import { DAEMON_EXIT } from './limits.js';
import { flushOutput } from './report-loop.js';
import { readAgentJsonObject, writeState } from './sandbox-files.js';

/**
 * The agent and its children have exited after a pause: the rest of the output, then the
 * checkpoint (its file, the last phase, the work as a patch on the source revision). Only the
 * stored checkpoint pauses the run; the runner reads final.json to tell.
 */
export async function endPaused(d: Daemon, agentCode: number, cwd: string, checkpointFile: string | undefined) {
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
    ...deliveryRecord(d, sent),
    exit_codes: { agent: agentCode },
    at_ms: Date.now(),
  });
  return exitCodeAfter(d, sent.delivered, DAEMON_EXIT.paused);
}

/** The agent's checkpoint file ($DOCKET_CHECKPOINT_FILE); missing or broken is a checkpoint without a session. */
export function readCheckpointFile(path: string | undefined): {
  session_id: string | null; last_phase: string | null; pending_actions: string[]; session: unknown; problem: string | null;
} {
  const none = { session_id: null, last_phase: null, pending_actions: [], session: null, problem: null };
  if (!path) return none;
  const read = readAgentJsonObject(path);
  if ('missing' in read) return { ...none, problem: 'the agent wrote no checkpoint file' };
  if ('broken' in read) return { ...none, problem: `the checkpoint file is not a JSON object: ${read.broken}` };
  const c = read.object;
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
  const backoff = reportBackoff(d);
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
