/** @jsxImportSource hono/jsx */
// The dashboard's "Managed runners" page: the organization's pools with their slots, the machines
// their runners registered as, their state and estimated cost (GET /v1/managed/pools), and, for an
// admin, the forms that create, start, stop, resize and delete them through the same API
// (docs/managed-runners.md). Stopping and deleting halt containers, so each asks for a confirmation.

import { ConfirmBox, DataTable, type Column } from "./components";
import { at, Layout } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

const poolAction = (id: string, what: string) => `${DASH}/managed/pools/${id}/${what}`;

/** Thousandths of a cent an hour, as dollars an hour. */
function perHour(millicents: number): string {
  return `$${(millicents / 100_000).toFixed(3)}/h`;
}

/** A slot's status in a word, its colour only a second cue. */
const slotClass = (status: string) => (status === "lost" ? "bad" : status === "connected" ? "ok" : "warn");

const SLOT_COLUMNS: Column<Json>[] = [
  { label: "Slot", cell: (s) => s.slot },
  { label: "Status", cell: (s) => <span class={slotClass(s.status)}>{s.status}</span>, class: "state" },
  { label: "Runner", cell: (s) => s.runner_name },
  { label: "Machine", cell: (s) => (s.machine_id ? <a href={`${DASH}/runners/${s.machine_id}`}>{s.machine_id}</a> : "—") },
  { label: "Started", cell: (s) => at(s.started_at_ms) },
  { label: "Last seen", cell: (s) => at(s.machine_last_seen_at_ms) },
  { label: "Last busy", cell: (s) => at(s.busy_at_ms) },
];

function SlotRows(props: { pool: Json }) {
  if (props.pool.slots.length === 0) {
    // The scaler acts on the cron tick: an operator waiting for a container is told when to expect it.
    const when = props.pool.state === "running" ? " A container starts at the next cron tick when queued work its labels cover waits." : "";
    return <p class="muted">No container runs in this pool.{when}</p>;
  }
  return <DataTable id={`slots-${props.pool.id}`} columns={SLOT_COLUMNS} rows={props.pool.slots} rowAttrs={(s) => ({ "data-slot": String(s.slot) })} />;
}

/** The container the pool halted last: its slot row is gone, so this says which one stopped and why. */
function LastHalt(props: { halt: Json }) {
  const { halt } = props;
  return (
    <p class="last-halt">
      Last stopped: slot {halt.slot} ({halt.runner_name}{halt.machine_id ? `, machine ${halt.machine_id}` : ", never registered"}) at {at(halt.at_ms)}: {halt.reason}.
    </p>
  );
}

/** A form that halts containers: it is sent only with its confirmation box ticked (the route checks it too). */
function ConfirmedForm(props: { pool: Json; what: "stop" | "delete"; label: string; warning: string }) {
  return (
    <form class="inline" method="post" action={poolAction(props.pool.id, props.what)}>
      <ConfirmBox warning={props.warning} />{" "}
      <button type="submit" class="danger" aria-label={`${props.label} ${props.pool.name}`}>{props.label}</button>
    </form>
  );
}

function PoolActions(props: { pool: Json }) {
  const { pool } = props;
  return (
    <>
      <form method="post" action={poolAction(pool.id, "update")}>
        <label>Minimum <input type="number" name="min_instances" min="0" value={String(pool.min_instances)} /></label>{" "}
        <label>Maximum <input type="number" name="max_instances" min="1" value={String(pool.max_instances)} /></label>{" "}
        <button type="submit" aria-label={`Save ${pool.name}`}>Save</button>
      </form>
      <div>
        {pool.state === "stopped" ? (
          <form class="inline" method="post" action={poolAction(pool.id, "start")}>
            <button type="submit" aria-label={`Start ${pool.name}`}>Start</button>
          </form>
        ) : (
          <ConfirmedForm pool={pool} what="stop" label="Stop" warning="halt its containers" />
        )}{" "}
        <ConfirmedForm pool={pool} what="delete" label="Delete" warning="halt its containers and delete the pool" />
      </div>
    </>
  );
}

function Pool(props: { pool: Json; admin: boolean }) {
  const { pool } = props;
  return (
    <section id={`pool-${pool.id}`}>
      <h2>{pool.name}</h2>
      <p>
        <span class="state">{pool.state}</span>; labels {pool.labels.length ? pool.labels.join(", ") : "none"}; {pool.min_instances} to {pool.max_instances} instances;
        idle after {Math.round(pool.idle_ms / 60_000)} min; estimated cost {perHour(pool.estimated_cost.running_hour_millicents)} now
        ({perHour(pool.estimated_cost.instance_hour_millicents)} per instance)
      </p>
      <SlotRows pool={pool} />
      {pool.last_halt && <LastHalt halt={pool.last_halt} />}
      {props.admin && <PoolActions pool={pool} />}
    </section>
  );
}

function CreateForm() {
  return (
    <form method="post" action={`${DASH}/managed/pools`}>
      <h2>New pool</h2>
      <div>
        <label>Name <input type="text" name="name" required /></label>{" "}
        <label>Labels <input type="text" name="labels" placeholder="gpu, linux" /></label>{" "}
        <label>Minimum <input type="number" name="min_instances" min="0" value="0" /></label>{" "}
        <label>Maximum <input type="number" name="max_instances" min="1" value="1" required /></label>{" "}
        <label>Idle minutes <input type="number" name="idle_minutes" min="1" placeholder="default" /></label>{" "}
        <button type="submit">Create</button>
      </div>
    </form>
  );
}

export function ManagedRunnersPage(props: { pools: Json[]; admin: boolean; notice?: string }) {
  return (
    <Layout title="Managed runners" signedIn admin={props.admin} section="managed">
      <h1>Managed runners</h1>
      {props.notice && <p class="ok" role="status">{props.notice}</p>}
      <p class="muted">Runner containers Docket starts for this organization; they register and claim like any runner.</p>
      {props.pools.length === 0 ? <p class="muted">No managed pool is configured.</p> : props.pools.map((pool) => <Pool pool={pool} admin={props.admin} />)}
      {props.admin && <CreateForm />}
    </Layout>
  );
}
