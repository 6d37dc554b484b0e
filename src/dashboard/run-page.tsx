/** @jsxImportSource hono/jsx */
// A run's page: its header, timelines, events, artifact and actions, from the API's own answers.

import { AttemptTimeline, type Mark } from "./attempt-timeline";
import { at, cents, Layout, TableWrap } from "./layout";
import { LIVE_EVENTS_SCRIPT } from "./assets";
import { Waiting } from "./runs-pages";
import { DASH } from "./session";

type Json = Record<string, any>;

export function Diff(props: { patch: string }) {
  const kind = (line: string) =>
    line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")
      ? "meta"
      : line.startsWith("@@")
        ? "hunk"
        : line.startsWith("+")
          ? "add"
          : line.startsWith("-")
            ? "del"
            : "ctx";
  return (
    <pre class="diff" id="diff" aria-label="Patch"><code>{props.patch.split("\n").map((line) => <span class={kind(line)}>{line || " "}</span>)}</code></pre>
  );
}

function StateTimeline(props: { events: Json[] }) {
  const hops = props.events.filter((e) => e.type === "run.state" || e.type === "run.created");
  return (
    <ol id="states">
      {hops.map((e) => (
        <li>
          {at(e.at_ms)} — {e.type === "run.created" ? <strong>dispatched (queued)</strong> : <><strong>{e.data.to}</strong> <span class="muted">from {e.data.from}: {e.data.reason}</span></>}
        </li>
      ))}
    </ol>
  );
}

function eventLine(e: Json): string {
  const data = e.type === "run.output" ? (e.data.lines as string[]).join(" ⏎ ") : JSON.stringify(e.data);
  return `#${e.seq} ${at(e.at_ms)} ${e.type} ${data}`;
}

function Callback(props: { run: Json; canAct: boolean }) {
  const cb = props.run.callback;
  if (!cb) return <p class="muted">No completion callback (dispatched without a callback_url).</p>;
  return (
    <>
      <TableWrap><table id="callback">
        <tbody>
          <tr><th scope="row">URL</th><td>{cb.url}</td></tr>
          <tr><th scope="row">Status</th><td class="state">{cb.status}</td></tr>
          <tr><th scope="row">Attempts</th><td>{cb.attempts} of {cb.max_attempts}</td></tr>
          <tr><th scope="row">Last attempt</th><td>{at(cb.last_attempt_at_ms)} {cb.last_status_code ? `HTTP ${cb.last_status_code}` : ""} {cb.last_error ?? ""}</td></tr>
          <tr><th scope="row">Delivered</th><td>{at(cb.delivered_at_ms)}</td></tr>
        </tbody>
      </table></TableWrap>
      {props.canAct && props.run.ended_at_ms && (
        <form method="post" action={`${DASH}/runs/${props.run.id}/redeliver`}>
          <button type="submit">Send the callback again</button>
        </form>
      )}
    </>
  );
}

export function RunPage(props: { run: Json; events: Json[]; marks: Mark[][]; nowMs: number; admin: boolean; notice?: string }) {
  const { run, events } = props;
  const ended = run.ended_at_ms !== null;
  const lastSeq = events.length ? events[events.length - 1].seq : 0;
  return (
    <Layout title={`Run ${run.id}`} signedIn admin={props.admin}>
      <h1>Run {run.id}</h1>
      {props.notice && <p role="status">{props.notice}</p>}
      <p>
        State: <span id="run-state" class="state" aria-live="polite">{run.state}</span> · attempt {run.attempt} · dispatched {at(run.created_at_ms)}
        {ended && <> · ended {at(run.ended_at_ms)}</>} · cost <span id="run-cost">{cents(run.cost_cents)}</span>
      </p>
      {run.waiting && <p id="run-waiting">Why it waits: <Waiting waiting={run.waiting} /></p>}
      {run.last_error && <p class="bad">Last error: {run.last_error}</p>}
      {run.recovery_failure && <p class="bad" id="run-recovery-failure">Not reconciled by the recovery of {at(run.recovery_failure.recovery_at_ms)} (passed over after {run.recovery_failure.tries} failed tries): {run.recovery_failure.error}</p>}
      {run.stop_request && <p class="warn">Stop requested {at(run.stop_request.requested_at_ms)} by {run.stop_request.by}{run.stop_request.reason ? `: ${run.stop_request.reason}` : ""}</p>}
      {!ended && (
        <form method="post" action={`${DASH}/runs/${run.id}/cancel`}>
          <label for="cancel-reason">Reason to cancel</label>{" "}
          <input id="cancel-reason" name="reason" type="text" maxlength={500} />{" "}
          <button type="submit" class="danger">Cancel run</button>
        </form>
      )}
      <h2>Brief</h2>
      <p>{run.brief}</p>
      <p class="muted">Needs {run.launch.protocol}{run.labels.length ? ` · labels ${run.labels.join(", ")}` : ""} · command <code>{run.launch.command.join(" ")}</code></p>
      <h2>Attempts</h2>
      <AttemptTimeline run={run} marks={props.marks} nowMs={props.nowMs} />
      {run.steps.length > 0 && <TableWrap><table id="attempts">
        <thead><tr><th scope="col">Attempt</th><th scope="col">Machine</th><th scope="col">Claimed</th><th scope="col">Launched</th><th scope="col">Ended</th><th scope="col">Outcome</th></tr></thead>
        <tbody>
          {run.steps.map((s: Json) => (
            <tr><td>{s.attempt}</td><td>{s.machine_id}</td><td>{at(s.claimed_at_ms)}</td><td>{at(s.launched_at_ms)}</td><td>{at(s.ended_at_ms)}</td><td>{s.outcome ?? "—"}{s.error ? `: ${s.error}` : ""}</td></tr>
          ))}
        </tbody>
      </table></TableWrap>}
      <h2>State timeline</h2>
      <StateTimeline events={events} />
      <h2>Artifact</h2>
      {run.artifact ? (
        run.artifact.empty ? <p>The run finished with an empty patch.</p> : <Diff patch={run.artifact.patch ?? ""} />
      ) : (
        <p class="muted">No artifact yet.</p>
      )}
      <h2>Completion callback</h2>
      {/* Sending a callback again needs the admin role in the API: a member is not offered it. */}
      <Callback run={run} canAct={props.admin} />
      <h2>Events</h2>
      <ol class="events" id="events" data-stream={`${DASH}/runs/${run.id}/events/stream`} data-after={String(lastSeq)} aria-live="polite">
        {events.map((e) => <li>{eventLine(e)}</li>)}
      </ol>
      {!ended && (
        <>
          <noscript><p><a href={`${DASH}/runs/${run.id}`}>Reload</a> to see new events.</p></noscript>
          <script src={LIVE_EVENTS_SCRIPT} />
        </>
      )}
    </Layout>
  );
}
