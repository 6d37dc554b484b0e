// The report loop: the agent's output relayed in batches while it runs, with a report at least
// every heartbeat interval when it is silent (reports are the attempt's heartbeats), each report
// retried under its seq until it is answered (docs/protocol.md, "Daemon reports").
import { errorText, retryDelayMs } from '../api.js';
import { sleep } from '../procs.js';
import { type Agent, stopAgent } from './agent.js';
import { attemptEnded, type Daemon, endsAttempt, reportBackoff } from './attempt.js';

/**
 * Output as it comes (batched), and a heartbeat when there is none, until the agent exits or the
 * attempt is over; the output still in flight is flushed before the final report. The first
 * heartbeat is due one interval after the start: the runner's `launched` call already told the
 * server the sandbox runs, so a short silent run sends no report but its final one (or none, when
 * it is stopped).
 */
export async function reportWhileRunning(d: Daemon, agent: Agent) {
  const backoff = reportBackoff(d);
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
export async function stopWhenAttemptOver(d: Daemon, agent: Agent) {
  while (!agent.exited) {
    if (d.attemptOver) {
      await stopAgent(d, agent, `the server answered ${d.attemptOver}: this attempt is over`);
      return;
    }
    await Promise.race([sleep(200), agent.exit]);
  }
}

export function hasOutputToSend(d: Daemon) {
  return d.reports.inFlight || d.buffer.hasNews;
}

/** The report in flight, or the next batch; returns false when it must be retried later. */
export async function sendBatch(d: Daemon): Promise<boolean> {
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

/** Output still buffered goes first, in bounded tries, so the final report carries only the last batch. */
export async function flushOutput(d: Daemon) {
  const backoff = reportBackoff(d);
  for (let i = 0, failures = 0; i < 1_000 && hasOutputToSend(d) && !d.attemptOver && failures < d.limits.finalTries; i++) {
    if (!(await sendBatch(d))) {
      failures += 1;
      await sleep(retryDelayMs(d.lastFailure, backoff.fail()));
    }
  }
}
