/** @jsxImportSource hono/jsx */
// One issue's ticket (GET /v1/autopilot/projects/:id/tickets/:number): where its admission stands,
// why, its last error and its history, each entry with its door and the person it relied on. It
// links to the issue in its tracker; a Linear ticket is named by its identifier (ENG-12).

import { DataTable } from "./components";
import { at, Layout } from "./layout";
import { issueLabel, LastError } from "./autopilot-pages";
import { DASH } from "./session";

type Json = Record<string, any>;

export function AutopilotTicketPage(props: { projectId: string; ticket: Json; admin: boolean }) {
  const { ticket } = props;
  const { name, where } = issueLabel(ticket.ticket ?? "", ticket.number);
  return (
    <Layout title={`Issue ${name}`} signedIn admin={props.admin} section="autopilot" subpage>
      <p><a href={`${DASH}/autopilot/${props.projectId}`}>Back to the project</a></p>
      <h1>Issue {name}</h1>
      <p><a id="tracker-issue" href={ticket.issue_url} rel="noreferrer">{name} {where}</a></p>
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
        <DataTable
          id="history"
          rows={ticket.history as Json[]}
          columns={[
            { label: "When", cell: (h: Json) => at(h.at_ms) },
            { label: "What", cell: (h: Json) => h.kind },
            { label: "Door", cell: (h: Json) => h.door },
            { label: "Why", cell: (h: Json) => h.reasons.join("; ") || "—" },
            { label: "Actor", cell: (h: Json) => h.actor ?? "—" },
          ]}
        />
      )}
    </Layout>
  );
}
