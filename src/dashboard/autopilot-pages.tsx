/** @jsxImportSource hono/jsx */
// The dashboard's autopilot pages: the organization's projects, one project with what its GitHub
// traffic costs, where its reconciliation stands (docs/autopilot.md, "GitHub's rate limit"), its last
// error and its tickets, and one ticket with its history and last error, from the API's own answers
// (GET /v1/autopilot/projects, …/projects/:id, …/projects/:id/tickets, …/tickets/:number). A project
// whose tracker is Linear shows its team (and Linear project), and its tickets by their Linear
// identifiers (ENG-12), each linking to the issue in Linear.

import { at, Layout, TableWrap } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

/** Where a project's issues come from, in words: the repository's issues, or a Linear team (and project). */
function trackerName(p: Json): string {
  const t = p.tracker;
  if (t?.kind !== "linear") return `GitHub Issues of ${p.repository}`;
  return `Linear team ${t.team} of ${t.workspace}${t.project ? `, project ${t.project}` : ""}`;
}

/** What makes an issue ready, in words: its label, or (Linear) its workflow state. */
const readyMarker = (p: Json) => (p.tracker?.kind === "linear" && p.tracker.ready_state ? <>moved to <code>{p.tracker.ready_state}</code></> : <>labeled <code>{p.ready_label}</code></>);

/** A Linear ticket's key (`linear:<workspace>/<TEAM-12>`) as its identifier and its issue's URL in Linear; null for another tracker's. */
export function linearIssue(key: string): { identifier: string; url: string } | null {
  const match = /^linear:([^/]+)\/([A-Za-z0-9_]+-\d+)$/.exec(key);
  return match ? { identifier: match[2], url: `https://linear.app/${match[1]}/issue/${match[2]}` } : null;
}

/** A ticket's name: ENG-12 (linking to Linear beside it) for Linear's, #12 for GitHub's. */
function TicketName(props: { ticket: Json; href: string }) {
  const linear = linearIssue(props.ticket.ticket ?? "");
  if (!linear) return <a href={props.href}>#{props.ticket.number}</a>;
  return <><a href={props.href}>{linear.identifier}</a> <a class="muted" href={linear.url} rel="noreferrer">in Linear</a></>;
}

export function AutopilotProjectsPage(props: { projects: Json[]; admin: boolean }) {
  return (
    <Layout title="Autopilot" signedIn admin={props.admin}>
      <h1>Autopilot projects</h1>
      {props.projects.length === 0 ? (
        <p class="muted">No autopilot project is configured.</p>
      ) : (
        <TableWrap><table>
          <thead><tr><th scope="col">Project</th><th scope="col">Tracker</th><th scope="col">Repository</th><th scope="col">Ready when</th><th scope="col">Queue capacity</th></tr></thead>
          <tbody>
            {props.projects.map((p) => (
              <tr><td><a href={`${DASH}/autopilot/${p.id}`}>{p.name}</a></td><td>{trackerName(p)}</td><td>{p.repository}</td><td>{readyMarker(p)}</td><td>{p.queue_capacity}</td></tr>
            ))}
          </tbody>
        </table></TableWrap>
      )}
    </Layout>
  );
}

/** The installation's headroom in words: remaining of limit, and when it resets. */
function headroom(limit: Json | null): string {
  if (!limit) return "not known yet (no request made)";
  return `${limit.remaining} of ${limit.limit} left, resets ${at(limit.reset_at_ms)}`;
}

/** A door's last failure to read GitHub, in words; the issue it was reading links to its ticket. */
function LastError(props: { error: Json | null; projectId: string; none: string }) {
  const { error } = props;
  if (!error) return <p id="last-error" class="muted">{props.none}</p>;
  const issue = typeof error.number === "number" ? <> (issue <a href={ticketHref(props.projectId, error.number)}>#{error.number}</a>)</> : null;
  return (
    <p id="last-error" class="error">
      {at(error.at_ms)}, {error.door}{issue}: {error.failure}. <span>{error.message}</span>
    </p>
  );
}

const ticketHref = (projectId: string, number: number) => `${DASH}/autopilot/${projectId}/tickets/${number}`;

function TicketsTable(props: { projectId: string; tickets: Json[] }) {
  if (props.tickets.length === 0) return <p class="muted">No issue has been seen yet.</p>;
  return (
    <TableWrap><table id="tickets">
      <thead><tr><th scope="col">Issue</th><th scope="col">Status</th><th scope="col">Why</th><th scope="col">Run</th><th scope="col">Changed</th></tr></thead>
      <tbody>
        {props.tickets.map((t) => (
          <tr>
            <td><TicketName ticket={t} href={ticketHref(props.projectId, t.number)} /></td>
            <td class="state">{t.status}</td>
            <td>{t.reasons.join("; ") || "—"}</td>
            <td>{t.run_id ? <a href={`${DASH}/runs/${t.run_id}`}>{t.run_id}</a> : "—"}</td>
            <td>{at(t.updated_at_ms)}</td>
          </tr>
        ))}
      </tbody>
    </table></TableWrap>
  );
}

export function AutopilotProjectPage(props: { project: Json; tickets: Json[]; admin: boolean }) {
  const { project } = props;
  const budget = project.github_budget;
  const reconciliation = project.reconciliation;
  return (
    <Layout title={`Autopilot ${project.name}`} signedIn admin={props.admin}>
      <h1>{project.name}</h1>
      <p>{trackerName(project)}: issues {readyMarker(project)} become runs, at most {project.queue_capacity} waiting; their pull requests go to {project.repository}.</p>
      <h2>GitHub budget</h2>
      <dl id="github-budget">
        <dt>Requests GitHub counted in the last hour</dt><dd>{budget.requests_last_hour}</dd>
        <dt>Installation rate limit</dt><dd>{headroom(budget.rate_limit)}</dd>
        <dt>Reserve kept for webhooks and publication</dt><dd>{budget.reserve}</dd>
      </dl>
      <h2>Reconciliation</h2>
      <dl id="reconciliation">
        <dt>State</dt><dd>{reconciliation.state === "paused" ? `Paused: ${reconciliation.paused_reason}` : "Running"}</dd>
        <dt>Pass under way</dt><dd>{reconciliation.pass ?? "none"}</dd>
        <dt>Last full pass finished</dt><dd>{at(reconciliation.last_full_pass_finished_at_ms)}</dd>
      </dl>
      <h2>Last error</h2>
      <LastError error={project.last_error} projectId={project.id} none="None: the last reads of GitHub succeeded." />
      <h2>Tickets</h2>
      <TicketsTable projectId={project.id} tickets={props.tickets} />
    </Layout>
  );
}

/** One issue's ticket: where its admission stands, why, its last error and its history. */
export function AutopilotTicketPage(props: { projectId: string; ticket: Json; admin: boolean }) {
  const { ticket } = props;
  const linear = linearIssue(ticket.ticket ?? "");
  const name = linear ? linear.identifier : `#${ticket.number}`;
  return (
    <Layout title={`Issue ${name}`} signedIn admin={props.admin}>
      <p><a href={`${DASH}/autopilot/${props.projectId}`}>Back to the project</a></p>
      <h1>Issue {name}</h1>
      {linear ? <p><a id="tracker-issue" href={linear.url} rel="noreferrer">{linear.identifier} in Linear</a></p> : null}
      <dl id="ticket">
        <dt>Status</dt><dd class="state">{ticket.status}</dd>
        <dt>Why</dt><dd>{ticket.reasons.join("; ") || "—"}</dd>
        <dt>Run</dt><dd>{ticket.run_id ? <a href={`${DASH}/runs/${ticket.run_id}`}>{ticket.run_id}</a> : "—"}</dd>
        <dt>Changed</dt><dd>{at(ticket.updated_at_ms)}</dd>
      </dl>
      <h2>Last error</h2>
      <LastError error={ticket.last_error} projectId={props.projectId} none="None: the last read of this issue succeeded." />
      <h2>History</h2>
      {ticket.history.length === 0 ? (
        <p class="muted">Nothing recorded yet.</p>
      ) : (
        <TableWrap><table id="history">
          <thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col">Door</th><th scope="col">Why</th><th scope="col">Actor</th></tr></thead>
          <tbody>
            {ticket.history.map((h: Json) => (
              <tr><td>{at(h.at_ms)}</td><td>{h.kind}</td><td>{h.door}</td><td>{h.reasons.join("; ") || "—"}</td><td>{h.actor ?? "—"}</td></tr>
            ))}
          </tbody>
        </table></TableWrap>
      )}
    </Layout>
  );
}
