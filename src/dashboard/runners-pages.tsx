/** @jsxImportSource hono/jsx */
// The runners and a runner's page: what each machine is (labels, protocols, version), when it was
// last heard from, the runs it ran, and deregistering it.

import { ConfirmBox, DataTable, type Column } from "./components";
import { at, Layout } from "./layout";
import { LiveUpdates, type LiveSettings } from "./live";
import { RunList } from "./run-list";
import { DASH } from "./session";

type Json = Record<string, any>;

/**
 * Deregistering a machine: a short button (it sits in a narrow column) whose accessible name says
 * which machine, sent with its confirmation box (the route refuses the form unticked).
 */
export function DeregisterButton(props: { runner: Json }) {
  const r = props.runner;
  return (
    <form class="inline" method="post" action={`${DASH}/runners/${r.id}/revoke`}>
      <ConfirmBox warning={`Deregister ${r.name}: its token stops working and it takes no more runs.`} />{" "}
      <button type="submit" class="danger" aria-label={`Deregister ${r.name} (${r.id})`}>Deregister</button>
    </form>
  );
}

/** Whether Docket heard from the machine within RUNNER_CONNECTED_WINDOW_MS, in words (never by colour alone). */
export function LastContact(props: { runner: Json; nowMs: number; connectedWindowMs: number }) {
  const connected = props.runner.deregistered_at_ms === null && props.nowMs - props.runner.last_seen_at_ms <= props.connectedWindowMs;
  return (
    <>
      {at(props.runner.last_seen_at_ms)} <span class={connected ? "ok" : "muted"}>{connected ? "● connected" : "○ not connected"}</span>
    </>
  );
}

/** A runner's name, with its id beside it when another listed runner has the same name. */
function RunnerName(props: { runner: Json; duplicate: boolean }) {
  const label = props.duplicate ? `${props.runner.name} (${props.runner.id})` : props.runner.name;
  return <a href={`${DASH}/runners/${props.runner.id}`}>{label}</a>;
}

/** `admin`: deregistering needs the admin role in the API, so only an admin is offered the button. */
export function RunnerRows(props: { runners: Json[]; nowMs: number; connectedWindowMs: number; admin: boolean }) {
  const names = new Map<string, number>();
  for (const r of props.runners) names.set(r.name, (names.get(r.name) ?? 0) + 1);
  const columns: Column<Json>[] = [
    { label: "Runner", cell: (r) => <RunnerName runner={r} duplicate={(names.get(r.name) ?? 0) > 1} /> },
    { label: "Labels", cell: (r) => r.labels.join(", ") || "—" },
    { label: "Protocols", cell: (r) => r.protocols.join(", ") },
    { label: "CLI", cell: (r) => r.cli_version },
    { label: "Last seen", cell: (r) => <LastContact runner={r} nowMs={props.nowMs} connectedWindowMs={props.connectedWindowMs} /> },
  ];
  if (props.admin) columns.push({ label: "Action", cell: (r) => <DeregisterButton runner={r} /> });
  return <DataTable columns={columns} rows={props.runners} rowAttrs={(r) => ({ "data-runner": r.id })} />;
}

export function RunnersPage(props: { runners: Json[]; nowMs: number; connectedWindowMs: number; admin: boolean; live: LiveSettings }) {
  return (
    <Layout title="Runners" signedIn admin={props.admin} section="runners">
      <h1>Runners</h1>
      <LiveUpdates live={props.live} />
      <section id="runners" data-live aria-label="Registered runners">
        {props.runners.length === 0 ? <p class="muted">No runner is registered.</p> : <RunnerRows {...props} />}
      </section>
    </Layout>
  );
}

function RunnerFacts(props: { runner: Json; nowMs: number; connectedWindowMs: number }) {
  const r = props.runner;
  return (
    <dl id="runner" data-live class="facts">
      <dt>Id</dt><dd>{r.id}</dd>
      <dt>Labels</dt><dd>{r.labels.join(", ") || "—"}</dd>
      <dt>Protocols</dt><dd>{r.protocols.join(", ")}</dd>
      <dt>CLI version</dt><dd>{r.cli_version}</dd>
      <dt>Registered</dt><dd>{at(r.registered_at_ms)}</dd>
      <dt>Last contact</dt><dd><LastContact runner={r} nowMs={props.nowMs} connectedWindowMs={props.connectedWindowMs} /></dd>
      {r.deregistered_at_ms !== null && <><dt>Deregistered</dt><dd class="bad">{at(r.deregistered_at_ms)}</dd></>}
    </dl>
  );
}

/** A runner's page: what it is, whether it is connected, and the runs it claimed in any attempt (GET /v1/runs?machine_id=). */
export function RunnerPage(props: { runner: Json; runs: Json[]; next: string | null; cursor?: string; nowMs: number; connectedWindowMs: number; admin: boolean; live: LiveSettings }) {
  const r = props.runner;
  const here = `${DASH}/runners/${r.id}`;
  return (
    <Layout title={`Runner ${r.name}`} signedIn admin={props.admin} section="runners" subpage>
      <h1>Runner {r.name} <span class="muted">{r.id}</span></h1>
      <LiveUpdates live={props.live} />
      <RunnerFacts runner={r} nowMs={props.nowMs} connectedWindowMs={props.connectedWindowMs} />
      {props.admin && r.deregistered_at_ms === null && <DeregisterButton runner={r} />}
      <section id="runs" data-live aria-labelledby="runner-runs-title">
        <h2 id="runner-runs-title">Runs it ran</h2>
        <p class="muted">Every run this machine claimed, in any attempt; the Machine column shows each run's latest.</p>
        <RunList runs={props.runs} empty="This machine has run nothing yet." nowMs={props.nowMs} />
        <p class="paging">
          {props.cursor && <a href={here}>Newest runs</a>}{" "}
          {props.next && <a href={`${here}?${new URLSearchParams({ cursor: props.next })}`} rel="next">Older runs</a>}
        </p>
      </section>
    </Layout>
  );
}
