/** @jsxImportSource hono/jsx */
// Credits: the balance, held credit, cost review and the ledger.

import { at, cents, Layout, TableWrap } from "./layout";
import { RunList } from "./runs-pages";
import { DASH } from "./session";

type Json = Record<string, any>;

/**
 * An admin's resolution of credit held for cost review or reconciliation: the reconciled cost, in
 * cents, and why (docs/protocol.md, "Cost review and reconciliation (admin)", "Run reservations and
 * cost review"). The API checks both, and the admin role.
 */
function ResolveForm(props: { action: string; name: string }) {
  return (
    <form class="inline" method="post" action={props.action}>
      <label>Cost in cents <input type="number" name="cost_cents" min="0" step="1" required /></label>{" "}
      <label>Note <input type="text" name="note" maxlength={1000} required /></label>{" "}
      <button type="submit" aria-label={`Resolve ${props.name}`}>Resolve</button>
    </form>
  );
}

function JobTable(props: { id: string; jobs: Json[]; resolvable?: boolean }) {
  if (props.jobs.length === 0) return <p class="muted">None.</p>;
  return (
    <TableWrap><table id={props.id}>
      <thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Run</th><th scope="col">Reserved</th><th scope="col">Cost</th><th scope="col">Why</th>{props.resolvable && <th scope="col">Resolve</th>}</tr></thead>
      <tbody>
        {props.jobs.map((j) => (
          <tr data-job={j.id}>
            <td>{j.id}</td><td>{j.status}</td>
            <td>{j.run_id ? <a href={`${DASH}/runs/${j.run_id}`}>{j.run_id}</a> : "—"}</td>
            <td>{cents(j.reserved_cents)}</td><td>{cents(j.cost_cents)}</td><td>{j.review_reason ?? j.dispatch?.last_error ?? "—"}</td>
            {props.resolvable && <td><ResolveForm action={`${DASH}/build-jobs/${encodeURIComponent(j.id)}/resolve`} name={j.id} /></td>}
          </tr>
        ))}
      </tbody>
    </table></TableWrap>
  );
}

/** Autopilot runs' model-spend reservations (docs/protocol.md, "Run reservations and cost review"). */
function ReservationTable(props: { id: string; reservations: Json[]; resolvable?: boolean }) {
  if (props.reservations.length === 0) return <p class="muted">None.</p>;
  return (
    <TableWrap><table id={props.id}>
      <thead><tr><th scope="col">Run</th><th scope="col">Project</th><th scope="col">Status</th><th scope="col">Reserved</th><th scope="col">Cost</th><th scope="col">Since</th>{props.resolvable && <th scope="col">Resolve</th>}</tr></thead>
      <tbody>
        {props.reservations.map((r) => (
          <tr data-run={r.run_id}>
            <td><a href={`${DASH}/runs/${r.run_id}`}>{r.run_id}</a></td><td>{r.project_name}</td><td>{r.status}</td>
            <td>{cents(r.reserved_cents)}</td><td>{r.cost_cents === null ? "unknown" : cents(r.cost_cents)}</td><td>{at(r.created_at_ms)}</td>
            {props.resolvable && <td><ResolveForm action={`${DASH}/autopilot/projects/${r.project_id}/reservations/${r.run_id}/resolve`} name={r.run_id} /></td>}
          </tr>
        ))}
      </tbody>
    </table></TableWrap>
  );
}

/**
 * `held`: every build job whose reservation is still held, whatever its status (queued, dispatch
 * unconfirmed, cost review, reconcile), and `reservations`: every autopilot run reservation still
 * held (running, cost review, reconcile), so the Holds rows account for the balance's Held.
 * `review`: the jobs an admin resolves. `admin`: only an admin is offered the resolve forms (the
 * API checks it).
 */
export function CreditsPage(props: { credits: Json; held: Json[]; review: Json[]; paused: Json[]; reservations: Json[]; admin: boolean; notice?: string }) {
  const c = props.credits;
  const runReview = props.reservations.filter((r) => r.status !== "held");
  return (
    <Layout title="Credits" signedIn admin={props.admin}>
      <h1>Credits</h1>
      {props.notice && <p role="status">{props.notice}</p>}
      <TableWrap><table id="balance">
        <tbody>
          <tr><th scope="row">Granted</th><td>{cents(c.granted_cents)}</td></tr>
          <tr><th scope="row">Available</th><td>{cents(c.available_cents)}</td></tr>
          <tr><th scope="row">Held</th><td>{cents(c.held_cents)}</td></tr>
          <tr><th scope="row">Spent</th><td>{cents(c.spent_cents)}</td></tr>
        </tbody>
      </table></TableWrap>
      <h2>Holds: build jobs holding reserved credit</h2>
      <JobTable id="holds" jobs={props.held} />
      <h2>Holds: autopilot runs' model-spend reservations</h2>
      <ReservationTable id="run-holds" reservations={props.reservations} />
      <h2>Cost review and reconciliation</h2>
      {(props.review.length > 0 || runReview.length > 0) && (
        <p class="muted">
          These still hold their reservations. An admin resolves each with its reconciled cost: within the reservation the cost is settled and the rest released;
          a cost above it is charged to available credit, which must cover it.
        </p>
      )}
      <h3>Build jobs</h3>
      <JobTable id="review" jobs={props.review} resolvable={props.admin} />
      <h3>Autopilot runs</h3>
      <ReservationTable id="run-review" reservations={runReview} resolvable={props.admin} />
      <h2>Paused runs (operator holds)</h2>
      <RunList runs={props.paused} empty="No paused runs." />
      <h2>Ledger</h2>
      <TableWrap><table id="ledger">
        <thead><tr><th scope="col">#</th><th scope="col">Kind</th><th scope="col">Amount</th><th scope="col">Job</th><th scope="col">Note</th><th scope="col">By</th><th scope="col">When</th></tr></thead>
        <tbody>
          {(c.entries as Json[]).map((e) => (
            <tr><td>{e.seq}</td><td>{e.kind}</td><td>{cents(e.amount_cents)}</td><td>{e.job_id ?? "—"}</td><td class="note">{e.note ?? "—"}</td><td>{e.actor}</td><td>{at(e.created_at_ms)}</td></tr>
          ))}
        </tbody>
      </table></TableWrap>
    </Layout>
  );
}
