/** @jsxImportSource hono/jsx */
// The dashboard's autopilot pages: the organization's projects, and one project with what its
// GitHub traffic costs and where its reconciliation stands (docs/autopilot.md, "GitHub's rate
// limit"), from the API's own answers (GET /v1/autopilot/projects, GET /v1/autopilot/projects/:id).

import { at, Layout, TableWrap } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

export function AutopilotProjectsPage(props: { projects: Json[]; admin: boolean }) {
  return (
    <Layout title="Autopilot" signedIn admin={props.admin}>
      <h1>Autopilot projects</h1>
      {props.projects.length === 0 ? (
        <p class="muted">No autopilot project is configured.</p>
      ) : (
        <TableWrap><table>
          <thead><tr><th scope="col">Project</th><th scope="col">Repository</th><th scope="col">Ready label</th><th scope="col">Queue capacity</th></tr></thead>
          <tbody>
            {props.projects.map((p) => (
              <tr><td><a href={`${DASH}/autopilot/${p.id}`}>{p.name}</a></td><td>{p.repository}</td><td>{p.ready_label}</td><td>{p.queue_capacity}</td></tr>
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

export function AutopilotProjectPage(props: { project: Json; admin: boolean }) {
  const { project } = props;
  const budget = project.github_budget;
  const reconciliation = project.reconciliation;
  return (
    <Layout title={`Autopilot ${project.name}`} signedIn admin={props.admin}>
      <h1>{project.name}</h1>
      <p>{project.repository}: issues labeled <code>{project.ready_label}</code> become runs, at most {project.queue_capacity} waiting.</p>
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
    </Layout>
  );
}
