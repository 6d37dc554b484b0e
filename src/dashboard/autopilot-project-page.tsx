/** @jsxImportSource hono/jsx */
// One autopilot project's page, from the API's own answers (GET /v1/autopilot/projects/:id, its
// scheduler, tickets and runs): its scheduler's gates with enable / drain / disable, what its
// tracker traffic costs and where its reconciliation stands (docs/autopilot.md, "GitHub's rate
// limit"), its last error, its tickets with why each was admitted or refused (the door, the person
// who made it ready, the reasons) and each one's last error, the runs blocked on a question, and
// the publications with their pull request and tracker deliveries.

import { DataTable } from "./components";
import { at, Layout } from "./layout";
import { IssueName, LastError, readyMarker, trackerName } from "./autopilot-pages";
import { ConfigSection } from "./autopilot-config-section";
import { BlockedRuns, Publications } from "./autopilot-runs-section";
import { SchedulerSection } from "./autopilot-scheduler-section";
import { DASH } from "./session";

type Json = Record<string, any>;

/** The installation's headroom in words: remaining of limit, and when it resets. */
function headroom(limit: Json | null): string {
  if (!limit) return "not known yet (no request made)";
  return `${limit.remaining} of ${limit.limit} left, resets ${at(limit.reset_at_ms)}`;
}

/** How the ticket's latest decision came about: what, through which door, and whose ready transition it relied on. */
function decisionText(d: Json | null): string {
  if (!d) return "—";
  const who = d.actor ? `, made ready by ${d.actor}${d.basis === "trusted_actor_assumption" ? " (trusted actor assumption)" : ""}` : "";
  return `${d.kind.replace("_", " ")} through the ${d.door} door${who}, ${at(d.at_ms)}`;
}

function TicketError(props: { error: Json | null }) {
  const e = props.error;
  return e ? <span class="error">{e.failure} ({e.door}, {at(e.at_ms)}): {e.message}</span> : <span class="muted">None</span>;
}

function TicketsTable(props: { projectId: string; tickets: Json[] }) {
  if (props.tickets.length === 0) return <p class="muted">No issue has been seen yet.</p>;
  return (
    <DataTable
      id="tickets"
      rows={props.tickets}
      columns={[
        { label: "Issue", cell: (t: Json) => <IssueName projectId={props.projectId} ticketKey={t.ticket} number={t.number} issueUrl={t.issue_url} /> },
        { label: "Status", class: "state", cell: (t: Json) => t.status },
        { label: "Why", cell: (t: Json) => t.reasons.join("; ") || "—" },
        { label: "Decided", cell: (t: Json) => decisionText(t.decision) },
        { label: "Run", cell: (t: Json) => (t.run_id ? <><a href={`${DASH}/runs/${t.run_id}`}>{t.run_id}</a> <span class="muted">({t.run_state ?? "unknown"})</span></> : "—") },
        { label: "Last error", cell: (t: Json) => <TicketError error={t.last_error} /> },
        { label: "Changed", cell: (t: Json) => at(t.updated_at_ms) },
      ]}
    />
  );
}

const trackerWord = (p: Json) => (p.provider === "linear" ? "Linear" : "GitHub");

function TrackerTraffic(props: { project: Json }) {
  const budget = props.project.github_budget;
  const reconciliation = props.project.reconciliation;
  const tracker = trackerWord(props.project);
  return (
    <>
      <h2>{tracker} budget</h2>
      <dl id="github-budget">
        <dt>Requests {tracker} counted in the last hour</dt><dd>{budget.requests_last_hour}</dd>
        <dt>{tracker === "Linear" ? "API key rate limit" : "Installation rate limit"}</dt><dd>{headroom(budget.rate_limit)}</dd>
        <dt>Reserve kept for webhooks and publication</dt><dd>{budget.reserve}</dd>
      </dl>
      <h2>Reconciliation</h2>
      <dl id="reconciliation">
        <dt>State</dt><dd>{reconciliation.state === "paused" ? `Paused: ${reconciliation.paused_reason}` : "Running"}</dd>
        <dt>Pass under way</dt><dd>{reconciliation.pass ?? "none"}</dd>
        <dt>Last full pass finished</dt><dd>{at(reconciliation.last_full_pass_finished_at_ms)}</dd>
      </dl>
    </>
  );
}

export interface ProjectPageData {
  project: Json;
  scheduler: Json;
  tickets: Json[];
  blocked: Json[];
  runs: Json[];
}

export function AutopilotProjectPage(props: ProjectPageData & { admin: boolean; notice?: string }) {
  const { project } = props;
  return (
    <Layout title={`Autopilot ${project.name}`} signedIn admin={props.admin} section="autopilot" subpage>
      <p><a href={`${DASH}/autopilot`}>All projects</a></p>
      <h1>{project.name}</h1>
      {props.notice && <p class="ok" role="status">{props.notice}</p>}
      <p>{trackerName(project)}: issues {readyMarker(project)} become runs, at most {project.queue_capacity} waiting; their pull requests go to {project.repository}.</p>
      <SchedulerSection scheduler={props.scheduler} projectName={project.name} admin={props.admin} />
      <TrackerTraffic project={project} />
      <h2>Last error</h2>
      <LastError error={project.last_error} projectId={project.id} none={`None: the last reads of ${trackerWord(project)} succeeded.`} />
      <h2>Tickets</h2>
      <TicketsTable projectId={project.id} tickets={props.tickets} />
      <BlockedRuns projectId={project.id} runs={props.blocked} admin={props.admin} />
      <Publications projectId={project.id} runs={props.runs} admin={props.admin} />
      <ConfigSection project={project} />
    </Layout>
  );
}
