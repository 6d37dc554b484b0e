/** @jsxImportSource hono/jsx */
// Credits: the balance, held credit, cost review and the ledger.

import { DataTable, type Column } from "./components";
import { at, cents, Layout, TableWrap } from "./layout";
import { RunList } from "./run-list";
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

/** Why a build job still holds its reservation, in words (docs/protocol.md, "Cost review and reconciliation (admin)"). */
const REVIEW_REASON_TEXT: Record<string, string> = {
  cost_above_reservation: "its run reported a cost above the reservation",
  cost_unknown: "its run completed without reporting a cost",
  ambiguous_failure: "its run failed or was cancelled after launching and reported no cost",
};

function jobWhy(j: Json): string {
  if (j.review_reason) return REVIEW_REASON_TEXT[j.review_reason] ?? j.review_reason;
  return j.dispatch?.last_error ?? "—";
}

/** Why a run's reservation is still held, in words (docs/protocol.md, "Run reservations and cost review"). */
function reservationWhy(r: Json): string {
  if (r.status === "reconcile") return REVIEW_REASON_TEXT.ambiguous_failure;
  if (r.status === "cost_review") return r.cost_cents === null ? REVIEW_REASON_TEXT.cost_unknown : REVIEW_REASON_TEXT.cost_above_reservation;
  return "its run has not ended";
}

const runLink = (id: string | null) => (id ? <a href={`${DASH}/runs/${id}`}>{id}</a> : "—");

function jobColumns(resolvable: boolean): Column<Json>[] {
  const columns: Column<Json>[] = [
    { label: "Job", cell: (j) => j.id },
    { label: "Status", cell: (j) => j.status, class: "state" },
    { label: "Run", cell: (j) => runLink(j.run_id) },
    { label: "Reserved", cell: (j) => cents(j.reserved_cents) },
    { label: "Cost", cell: (j) => cents(j.cost_cents) },
    { label: "Why", cell: jobWhy },
  ];
  if (resolvable) columns.push({ label: "Resolve", cell: (j) => <ResolveForm action={`${DASH}/build-jobs/${encodeURIComponent(j.id)}/resolve`} name={j.id} /> });
  return columns;
}

function JobTable(props: { id: string; jobs: Json[]; resolvable?: boolean }) {
  if (props.jobs.length === 0) return <p class="muted">None.</p>;
  return <DataTable id={props.id} columns={jobColumns(!!props.resolvable)} rows={props.jobs} rowAttrs={(j) => ({ "data-job": j.id })} />;
}

function reservationColumns(resolvable: boolean): Column<Json>[] {
  const columns: Column<Json>[] = [
    { label: "Run", cell: (r) => runLink(r.run_id) },
    { label: "Project", cell: (r) => r.project_name },
    { label: "Status", cell: (r) => r.status, class: "state" },
    { label: "Reserved", cell: (r) => cents(r.reserved_cents) },
    { label: "Cost", cell: (r) => (r.cost_cents === null ? "unknown" : cents(r.cost_cents)) },
    { label: "Why", cell: reservationWhy },
    { label: "Since", cell: (r) => at(r.created_at_ms) },
  ];
  const action = (r: Json) => `${DASH}/autopilot/projects/${r.project_id}/reservations/${r.run_id}/resolve`;
  if (resolvable) columns.push({ label: "Resolve", cell: (r) => <ResolveForm action={action(r)} name={`the reservation of ${r.run_id}`} /> });
  return columns;
}

/** Autopilot runs' model-spend reservations (docs/protocol.md, "Run reservations and cost review"). */
function ReservationTable(props: { id: string; reservations: Json[]; resolvable?: boolean }) {
  if (props.reservations.length === 0) return <p class="muted">None.</p>;
  return <DataTable id={props.id} columns={reservationColumns(!!props.resolvable)} rows={props.reservations} rowAttrs={(r) => ({ "data-run": r.run_id })} />;
}

const LEDGER_COLUMNS: Column<Json>[] = [
  { label: "#", cell: (e) => e.seq },
  { label: "Kind", cell: (e) => e.kind },
  { label: "Amount", cell: (e) => cents(e.amount_cents) },
  { label: "Job", cell: (e) => e.job_id ?? "—" },
  { label: "Note", cell: (e) => e.note ?? "—", class: "note" },
  { label: "By", cell: (e) => e.actor },
  { label: "When", cell: (e) => at(e.created_at_ms) },
];

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
    <Layout title="Credits" signedIn admin={props.admin} section="credits">
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
      {(c.entries as Json[]).length === 0 ? <p class="muted">No entries yet.</p> : <DataTable id="ledger" columns={LEDGER_COLUMNS} rows={c.entries as Json[]} />}
    </Layout>
  );
}
