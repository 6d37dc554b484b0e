/** @jsxImportSource hono/jsx */
// A run's page: its header, timelines, events, artifact and actions, from the API's own answers.
// The header, the timelines and the artifact come from the run's record (GET /v1/runs/:id); the
// events are one page of them, newest first, with a link to the page before.

import { AttemptTimeline, type Mark } from "./attempt-timeline";
import { IssueName } from "./autopilot-pages";
import { DataTable, type Column } from "./components";
import { eventText } from "./event-text";
import { at, cents, Layout, TableWrap } from "./layout";
import { LIVE_EVENTS_SCRIPT } from "./assets";
import { RunActions } from "./run-actions";
import { Waiting } from "./runs-pages";
import { DASH } from "./session";

type Json = Record<string, any>;

/** A page of the run's events, newest first: `before` the cursor it was read from (null: the newest), `nextCursor` the page before it. */
export interface EventsPage {
  events: Json[];
  nextCursor: string | null;
  before: string | null;
}

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

/** The run's changes of state from its record's state history. */
function StateTimeline(props: { run: Json }) {
  const { run } = props;
  const history = run.state_history as Json[] | null;
  if (history === null) return <p class="muted" id="states">This run was stored before runs kept their state history: its events below tell its changes of state.</p>;
  return (
    <ol id="states" data-live>
      {run.state_history_dropped > 0
        ? <li class="muted">{run.state_history_dropped} earlier changes of state not kept</li>
        : <li>{at(run.created_at_ms)} — <strong>queued</strong> <span class="muted">dispatched</span></li>}
      {history.map((h) => (
        <li>
          {at(h.at_ms)} — <strong>{h.to}</strong> <span class="muted">from {h.from}{h.attempt > 0 ? `, attempt ${h.attempt}` : ""}: {h.reason}</span>
        </li>
      ))}
    </ol>
  );
}

/** Where the run works and what it cost: repository and revision, model, cost, labels and command. */
function RunFacts(props: { run: Json }) {
  const { run } = props;
  const revision = run.artifact?.source_revision ?? run.publication?.source_revision ?? run.repository?.commit ?? null;
  return (
    <dl id="run-facts" class="facts">
      <dt>Repository</dt><dd>{run.repository ? run.repository.url : <span class="muted">none given</span>}</dd>
      <dt>Revision</dt><dd>{revision ? <code>{revision}</code> : <span class="muted">{run.repository ? "none pinned at dispatch" : "—"}</span>}</dd>
      <dt>Model</dt><dd>{run.artifact?.model ?? <span class="muted">{run.artifact ? "not reported" : "known once the agent reports a result"}</span>}</dd>
      <dt>Cost</dt><dd id="run-cost">{run.cost_cents === null ? <span class="muted">{run.ended_at_ms ? "none reported" : "known once the agent reports a result"}</span> : cents(run.cost_cents)}</dd>
      <dt>Needs</dt><dd>{run.launch.protocol}{run.labels.length ? ` · labels ${run.labels.join(", ")}` : ""} · command <code>{run.launch.command.join(" ")}</code></dd>
      {run.project_id && <><dt>Autopilot project</dt><dd><a href={`${DASH}/autopilot/${run.project_id}`}>{run.project_id}</a></dd></>}
      {run.project_id && typeof run.metadata?.autopilot_ticket === "string" && (
        <><dt>Issue</dt><dd><IssueName projectId={run.project_id} ticketKey={run.metadata.autopilot_ticket} issueUrl={run.metadata.issue_url} /></dd></>
      )}
      {run.publication && <><dt>Publication</dt><dd><Publication publication={run.publication} /></dd></>}
    </dl>
  );
}

/** An autopilot run's publication: its pull request once confirmed, else its branch and where the hand-off stands. */
function Publication(props: { publication: Json }) {
  const p = props.publication;
  if (p.pr) return <a href={p.pr.url}>pull request #{p.pr.number}</a>;
  return <>branch <code>{p.branch}</code>, {p.pushed_at_ms ? "pushed" : "not pushed yet"}{p.last_error ? `; last try failed: ${p.last_error}` : ""}</>;
}

/** Why a run has no artifact, said for each way a run can end without one. */
function noArtifactReason(run: Json): string {
  if (run.ended_at_ms === null) return `No artifact yet: the run is ${run.state}.`;
  if (run.state === "failed") return `No artifact: the run failed before the agent reported a result${run.last_error ? ` (${run.last_error})` : ""}.`;
  if (run.state === "cancelled") {
    const reason = run.stop_request?.reason ? ` (${run.stop_request.reason})` : "";
    return run.attempt === 0 ? `No artifact: the run was cancelled before a runner took it${reason}.` : `No artifact: the run was cancelled before the agent reported a patch${reason}.`;
  }
  return "No artifact: the run completed without reporting a patch.";
}

function Artifact(props: { run: Json }) {
  const { run } = props;
  if (!run.artifact) return <p class="muted" id="artifact">{noArtifactReason(run)}</p>;
  if (run.artifact.empty) return <p id="artifact">The run {run.ended_at_ms ? "completed" : "reported a result"} with no changes: its patch is empty.</p>;
  return (
    <div id="artifact">
      {run.artifact.limitations.length > 0 && <p>The agent could not: {run.artifact.limitations.join("; ")}</p>}
      <Diff patch={run.artifact.patch ?? ""} />
    </div>
  );
}

function Callback(props: { run: Json; canAct: boolean }) {
  const cb = props.run.callback;
  if (!cb) return <p class="muted">No completion callback (dispatched without a callback_url).</p>;
  return (
    <>
      <TableWrap><table id="callback">
        <tbody>
          <tr><th scope="row">URL</th><td>{cb.url}</td></tr>
          <tr><th scope="row">Status</th><td class="state">{cb.status}{cb.status === "failed" ? ": every attempt of this round failed" : ""}</td></tr>
          <tr><th scope="row">Attempts</th><td>{cb.attempts} of {cb.max_attempts}</td></tr>
          <tr><th scope="row">Last attempt</th><td>{at(cb.last_attempt_at_ms)} {cb.last_status_code ? `HTTP ${cb.last_status_code}` : ""} {cb.last_error ?? ""}</td></tr>
          <tr><th scope="row">Delivered</th><td>{at(cb.delivered_at_ms)}</td></tr>
        </tbody>
      </table></TableWrap>
      {/* The API sends a callback again once the run has ended (a failed round, or a receiver that lost it); an admin's action. */}
      {props.canAct && props.run.ended_at_ms && (
        <form method="post" action={`${DASH}/runs/${props.run.id}/redeliver`}>
          <button type="submit" aria-label={`${cb.status === "failed" ? "Retry" : "Send again"} the completion callback of run ${props.run.id}`}>
            {cb.status === "failed" ? "Retry the failed callback" : "Send the callback again"}
          </button>
        </form>
      )}
    </>
  );
}

const ATTEMPT_COLUMNS: Column<Json>[] = [
  { label: "Attempt", cell: (s) => String(s.attempt) },
  { label: "Machine", cell: (s) => s.machine_id },
  { label: "Claimed", cell: (s) => at(s.claimed_at_ms) },
  { label: "Launched", cell: (s) => at(s.launched_at_ms) },
  { label: "Ended", cell: (s) => at(s.ended_at_ms) },
  { label: "Outcome", cell: (s) => `${s.outcome ?? "—"}${s.error ? `: ${s.error}` : ""}` },
];

/** One event in words (an output line a line of its own), its attempt, and its raw data for whoever needs the fields. */
function EventItem(props: { event: Json }) {
  const e = props.event;
  const attempt = typeof e.data?.attempt === "number" && e.data.attempt > 0 ? ` · attempt ${e.data.attempt}` : "";
  return (
    <li data-seq={String(e.seq)}>
      <span class="muted">#{e.seq} {at(e.at_ms)}{attempt}</span> <span class="event-text">{eventText(e.type, e.data ?? {}).split("\n").map((line, i) => <>{i > 0 && <br />}{line}</>)}</span>
      <details><summary>{e.type} data</summary><pre>{JSON.stringify(e.data, null, 2)}</pre></details>
    </li>
  );
}

/** One page of the run's events, newest first, with links to the page before it and back to the newest. */
function Events(props: { run: Json; page: EventsPage; live: boolean }) {
  const { run, page } = props;
  const newest = page.events[0]?.seq ?? 0;
  const oldest = page.events[page.events.length - 1]?.seq ?? 0;
  return (
    <section id="events-section" aria-labelledby="events-heading">
      <h2 id="events-heading">Events</h2>
      {page.events.length === 0
        ? <p class="muted">No events{page.before ? ` before #${page.before}` : ""}.</p>
        : <p class="muted">Newest first: #{newest} to #{oldest}.</p>}
      <ol class="events" id="events" data-live {...(props.live ? { "data-stream": `${DASH}/runs/${run.id}/events/stream`, "data-after": String(newest) } : {})}>
        {page.events.map((e) => <EventItem event={e} />)}
      </ol>
      {(page.nextCursor || page.before) && (
        <nav aria-label="Event pages">
          {page.nextCursor && <a id="earlier-events" href={`${DASH}/runs/${run.id}?before=${page.nextCursor}#events-heading`}>Earlier events (before #{page.nextCursor})</a>}{" "}
          {page.before && <a href={`${DASH}/runs/${run.id}#events-heading`}>Newest events</a>}
        </nav>
      )}
      {!page.nextCursor && oldest > 1 && <p class="muted">Events before #{oldest} were deleted after the retention period.</p>}
    </section>
  );
}

export function RunPage(props: { run: Json; events: EventsPage; marks: Mark[][]; nowMs: number; admin: boolean; notice?: string }) {
  const { run } = props;
  const ended = run.ended_at_ms !== null;
  // The newest page follows the run live while it has not ended; an earlier page stays as it is.
  const live = !ended && props.events.before === null;
  return (
    <Layout title={`Run ${run.id}`} signedIn admin={props.admin} section="runs" subpage>
      <h1>Run {run.id}</h1>
      {props.notice && <p role="status">{props.notice}</p>}
      <p id="run-summary" data-live>
        State: <span id="run-state" class="state" aria-live="polite">{run.state}</span>{run.hold ? " (held by an operator)" : ""} · attempt {run.attempt} · dispatched {at(run.created_at_ms)}
        {ended && <> · ended {at(run.ended_at_ms)}</>}{run.phase && !ended ? ` · phase ${run.phase}` : ""}
      </p>
      {run.waiting && <p id="run-waiting">Why it waits: <Waiting waiting={run.waiting} /></p>}
      {run.pause_reason && (run.state === "paused" || run.state === "pausing") && <p class="warn">Paused: {run.pause_reason}</p>}
      {run.blocker && run.state === "blocked" && <p class="warn" id="run-blocker">Blocked: {run.blocker.summary} A person must: {run.blocker.human_action}</p>}
      {run.last_error && <p class="bad">Last error: {run.last_error}</p>}
      {run.recovery_failure && <p class="bad" id="run-recovery-failure">Not reconciled by the recovery of {at(run.recovery_failure.recovery_at_ms)} (passed over after {run.recovery_failure.tries} failed tries): {run.recovery_failure.error}</p>}
      {run.stop_request && <p class="warn">Stop requested {at(run.stop_request.requested_at_ms)} by {run.stop_request.by}{run.stop_request.reason ? `: ${run.stop_request.reason}` : ""}</p>}
      <RunActions run={run} />
      <RunFacts run={run} />
      <h2>Brief</h2>
      <p class="brief">{run.brief}</p>
      <h2>Attempts</h2>
      <div id="attempts-section" data-live>
        <AttemptTimeline run={run} marks={props.marks} nowMs={props.nowMs} />
        {run.steps.length > 0 && <DataTable id="attempts" columns={ATTEMPT_COLUMNS} rows={run.steps as Json[]} />}
      </div>
      <h2>State timeline</h2>
      <StateTimeline run={run} />
      <h2>Artifact</h2>
      <Artifact run={run} />
      <h2>Completion callback</h2>
      {/* Sending a callback again needs the admin role in the API: a member is not offered it. */}
      <Callback run={run} canAct={props.admin} />
      <Events run={run} page={props.events} live={live} />
      {live && (
        <>
          <p id="live-status" class="bad" role="status"></p>
          <noscript><p><a href={`${DASH}/runs/${run.id}`}>Reload</a> to see new events.</p></noscript>
          <script src={LIVE_EVENTS_SCRIPT} />
        </>
      )}
    </Layout>
  );
}
