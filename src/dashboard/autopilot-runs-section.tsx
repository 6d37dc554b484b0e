/** @jsxImportSource hono/jsx */
// A project's runs on its page (GET /v1/autopilot/projects/:id/runs; docs/autopilot.md, "Blocked
// runs" and "Publication"): the runs waiting for a person, with their questions and what the person
// must do, and the publications with their pull request and each tracker delivery's state (pending,
// delivered, failed with its last error), with "Retry" on a failed one for an admin.

import { DataTable } from "./components";
import { at } from "./layout";
import { DASH } from "./session";
import { IssueName } from "./autopilot-pages";

type Json = Record<string, any>;

const RunLink = (props: { run: Json }) => <><a href={`${DASH}/runs/${props.run.id}`}>{props.run.id}</a> <span class="muted">({props.run.state})</span></>;

const Issue = (props: { projectId: string; run: Json }) =>
  props.run.ticket ? <IssueName projectId={props.projectId} ticketKey={props.run.ticket} issueUrl={props.run.issue_url} /> : <>{props.run.title}</>;

function Questions(props: { blocker: Json }) {
  const { blocker } = props;
  return (
    <>
      <p>{blocker.summary}</p>
      {blocker.questions.length > 0 ? <ol class="questions">{blocker.questions.map((q: string) => <li>{q}</li>)}</ol> : <p class="muted">No question asked.</p>}
    </>
  );
}

const DELIVERY_NAMES: Record<string, string> = { blocker_comment: "Blocker comment", review_label: "Review label", pr_comment: "Pull-request comment", failure_comment: "Failure comment" };
const DELIVERY_STATES: Record<string, { sign: string; tone: string }> = { pending: { sign: "…", tone: "warn" }, delivered: { sign: "✓", tone: "ok" }, failed: { sign: "✗", tone: "bad" } };

/** The pull request, or why there is none yet. */
function PullRequest(props: { publication: Json }) {
  const p = props.publication;
  if (p.pr) return <a href={p.pr.url} rel="noreferrer">#{p.pr.number}</a>;
  return (
    <>
      <span class="muted">None yet: branch <code>{p.branch}</code> {p.pushed_at_ms ? "pushed" : "not pushed yet"}</span>
      {p.last_error && <span class="error"> Last try: {p.last_error}</span>}
    </>
  );
}

function Delivery(props: { projectId: string; run: Json; delivery: Json; admin: boolean }) {
  const d = props.delivery;
  const state = DELIVERY_STATES[d.status] ?? { sign: "", tone: "" };
  const name = DELIVERY_NAMES[d.kind] ?? d.kind;
  return (
    <li data-delivery={d.kind}>
      {name}: <span class={state.tone}>{state.sign} {d.status}</span> <span class="muted">({d.tries} of {d.max_tries} tries)</span>
      {d.receipt && <> <a href={d.receipt.url} rel="noreferrer">comment</a></>}
      {d.last_error && <span class="error"> {d.last_error}</span>}
      {props.admin && d.status === "failed" && (
        <form class="inline" method="post" action={`${DASH}/autopilot/${props.projectId}/runs/${props.run.id}/deliveries/${d.kind}/retry`}>
          {" "}<button type="submit" aria-label={`Retry the ${name.toLowerCase()} of ${props.run.id}`}>Retry</button>
        </form>
      )}
    </li>
  );
}

const Deliveries = (props: { projectId: string; run: Json; admin: boolean }) =>
  props.run.deliveries.length === 0 ? <span class="muted">None yet</span> : <ul class="deliveries">{props.run.deliveries.map((d: Json) => <Delivery {...props} delivery={d} />)}</ul>;

export function BlockedRuns(props: { projectId: string; runs: Json[]; admin: boolean }) {
  return (
    <section id="blocked" aria-labelledby="blocked-heading">
      <h2 id="blocked-heading">Blocked runs</h2>
      {props.runs.length === 0 ? (
        <p class="muted">No run waits for a person.</p>
      ) : (
        <>
          <p>Answer on the issue, then remove its ready label and add it again: the run goes back to the queue.</p>
          <DataTable
            id="blocked-runs"
            rows={props.runs}
            columns={[
              { label: "Issue", cell: (r: Json) => <Issue projectId={props.projectId} run={r} /> },
              { label: "Run", cell: (r: Json) => <RunLink run={r} /> },
              { label: "Questions", cell: (r: Json) => (r.blocker ? <Questions blocker={r.blocker} /> : "—") },
              { label: "A person must", cell: (r: Json) => r.blocker?.human_action ?? "—" },
              { label: "Blocked since", cell: (r: Json) => at(r.blocker?.at_ms) },
              { label: "Tracker deliveries", cell: (r: Json) => <Deliveries projectId={props.projectId} run={r} admin={props.admin} /> },
            ]}
          />
        </>
      )}
    </section>
  );
}

/** The runs whose publication started, among the project's latest runs. */
export function Publications(props: { projectId: string; runs: Json[]; admin: boolean }) {
  const published = props.runs.filter((r) => r.publication);
  return (
    <section id="publications-section" aria-labelledby="publications-heading">
      <h2 id="publications-heading">Publications</h2>
      {published.length === 0 ? (
        <p class="muted">No run has reached its pull request yet.</p>
      ) : (
        <DataTable
          id="publications"
          rows={published}
          columns={[
            { label: "Issue", cell: (r: Json) => <Issue projectId={props.projectId} run={r} /> },
            { label: "Run", cell: (r: Json) => <RunLink run={r} /> },
            { label: "Pull request", cell: (r: Json) => <PullRequest publication={r.publication} /> },
            { label: "Tracker deliveries", cell: (r: Json) => <Deliveries projectId={props.projectId} run={r} admin={props.admin} /> },
          ]}
        />
      )}
    </section>
  );
}
