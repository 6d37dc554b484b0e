/** @jsxImportSource hono/jsx */
// The queue and the runs list: each takes the API's own answers (docs/protocol.md) and renders them.
// Their lists are live regions (live.tsx): refreshed in place, without a reload.

import { RUN_STATES } from "../protocol/runs";
import type { HourlyActivity } from "./activity";
import { ActivityCharts } from "./charts";
import { DataTable, type Column } from "./components";
import { at, Layout } from "./layout";
import { LiveUpdates, type LiveSettings } from "./live";
import { RunLink, RunList } from "./run-list";
import { DASH } from "./session";

type Json = Record<string, any>;

export function Waiting(props: { waiting: Json | null }) {
  if (!props.waiting) return <span class="muted">—</span>;
  return (
    <span class="waiting" data-reason={props.waiting.reason}>
      <strong>{props.waiting.reason.replaceAll("_", " ")}</strong>: {props.waiting.detail.message}
    </span>
  );
}

const QUEUE_COLUMNS: Column<Json>[] = [
  { label: "#", cell: (r) => String(r.position) },
  { label: "Run", cell: (r) => <RunLink run={r} /> },
  { label: "Needs", cell: (r) => `${r.protocol}${r.labels.length > 0 ? ` · ${r.labels.join(", ")}` : ""}` },
  { label: "Priority", cell: (r) => String(r.priority) },
  { label: "Queued", cell: (r) => at(r.queued_at_ms) },
  { label: "Why it waits", cell: (r) => <Waiting waiting={r.waiting} /> },
];

/** `activity`: null on a live refresh, which swaps only the lists (the charts are read on a page load). */
export function QueuePage(props: { queue: Json; recent: Json[]; activity: HourlyActivity | null; admin: boolean; live: LiveSettings }) {
  const queued: Json[] = (props.queue.runs as Json[]).map((r, i) => ({ ...r, position: i + 1 }));
  return (
    <Layout title="Queue" signedIn admin={props.admin} section="queue">
      <h1>Queue</h1>
      {props.activity && <ActivityCharts activity={props.activity} />}
      <LiveUpdates live={props.live} />
      <section id="queue" data-live aria-labelledby="queue-title">
        <h2 id="queue-title">Queued runs, in dispatch order</h2>
        {queued.length === 0 ? <p class="muted">Nothing is queued.</p> : <DataTable columns={QUEUE_COLUMNS} rows={queued} rowAttrs={(r) => ({ "data-run": r.id })} />}
        {props.queue.truncated && <p class="muted">More runs are queued than this page lists.</p>}
      </section>
      <section id="recent-runs" data-live aria-labelledby="recent-title">
        <h2 id="recent-title">Recent runs</h2>
        <RunList runs={props.recent} />
        <p><a href={`${DASH}/runs`}>All runs, with filters</a></p>
      </section>
    </Layout>
  );
}

/** The runs list's filters as the API takes them (GET /v1/runs). */
export const RUN_FILTERS = ["state", "project_id", "label", "machine_id"] as const;
export type RunFilters = Partial<Record<(typeof RUN_FILTERS)[number], string>>;

/** The runs list's address with these filters (and a cursor). */
export function runsHref(filters: RunFilters, cursor?: string): string {
  const query = new URLSearchParams(Object.entries(filters).filter(([, v]) => v) as [string, string][]);
  if (cursor) query.set("cursor", cursor);
  const text = query.toString();
  return text ? `${DASH}/runs?${text}` : `${DASH}/runs`;
}

/** The API's refusal of one filter (or of the cursor): which, and its message. */
export interface FilterRefusal {
  field: string;
  message: string;
}

const PROBLEM_ID = "run-filters-problem";

/** The attributes that tie a filter's field to the refusal that names it. */
function problemAttrs(name: string, refused?: FilterRefusal | null) {
  return refused?.field === name ? { "aria-invalid": "true", "aria-describedby": PROBLEM_ID } : {};
}

function TextFilter(props: { name: string; label: string; value?: string; hint: string; refused?: FilterRefusal | null }) {
  return (
    <label>
      {props.label} <input type="text" name={props.name} value={props.value ?? ""} placeholder={props.hint} {...problemAttrs(props.name, props.refused)} />
    </label>
  );
}

/** The organization's autopilot projects to choose from, or null when they are more than one page of the API holds. */
export type ProjectChoices = { id: string; name: string }[] | null;

/**
 * The project filter: a choice of the organization's projects by name (the one filtered by kept,
 * even if it is gone), or an id to type when there are too many to list; none without projects.
 */
function ProjectFilter(props: { value?: string; projects: ProjectChoices; refused?: FilterRefusal | null }) {
  if (props.projects === null) return <TextFilter name="project_id" label="Project" value={props.value} hint="apj_…" refused={props.refused} />;
  const choices = props.value && !props.projects.some((p) => p.id === props.value) ? [...props.projects, { id: props.value, name: props.value }] : props.projects;
  if (choices.length === 0) return null;
  return (
    <label>
      Project{" "}
      <select name="project_id" {...problemAttrs("project_id", props.refused)}>
        <option value="">any project</option>
        {choices.map((p) => <option value={p.id} selected={props.value === p.id}>{p.name}</option>)}
      </select>
    </label>
  );
}

function FilterForm(props: { filters: RunFilters; projects: ProjectChoices; refused?: FilterRefusal | null }) {
  return (
    <form method="get" action={`${DASH}/runs`} id="run-filters" class="filters" aria-label="Filter runs">
      <label>
        State{" "}
        <select name="state" {...problemAttrs("state", props.refused)}>
          <option value="">any state</option>
          {RUN_STATES.map((s) => <option value={s} selected={props.filters.state === s}>{s}</option>)}
        </select>
      </label>{" "}
      <ProjectFilter value={props.filters.project_id} projects={props.projects} refused={props.refused} />{" "}
      <TextFilter name="label" label="Label" value={props.filters.label} hint="gpu" refused={props.refused} />{" "}
      <TextFilter name="machine_id" label="Machine" value={props.filters.machine_id} hint="mch_…" refused={props.refused} />{" "}
      <button type="submit">Filter runs</button> <a href={`${DASH}/runs`}>Clear filters</a>
      {props.refused && (
        <p id={PROBLEM_ID} class="error" role="alert">
          {props.refused.field === "cursor" ? "That page of older runs cannot be read" : "These filters cannot be used"}: {props.refused.message}
        </p>
      )}
    </form>
  );
}

/** The search by run id: an exact id opens the run's page; anything else is said back here. */
function FindRun(props: { value?: string; problem?: string }) {
  return (
    <form method="get" action={`${DASH}/runs`} id="find-run" role="search" aria-label="Find a run by id">
      <label>
        Run id <input type="text" name="run" value={props.value ?? ""} placeholder="run_…" aria-describedby={props.problem ? "find-run-problem" : undefined} />
      </label>{" "}
      <button type="submit">Find run</button>
      {props.problem && <p id="find-run-problem" class="error">{props.problem}</p>}
    </form>
  );
}

export function RunsPage(props: {
  runs: Json[];
  next: string | null;
  filters: RunFilters;
  cursor?: string;
  find?: { value: string; problem: string };
  /** The API refused a filter or the cursor: the form says so, and no run is listed. */
  refused?: FilterRefusal | null;
  projects: ProjectChoices;
  admin: boolean;
  live: LiveSettings;
}) {
  const filtered = Object.values(props.filters).some(Boolean);
  return (
    <Layout title="Runs" signedIn admin={props.admin} section="runs">
      <h1>Runs</h1>
      <FindRun value={props.find?.value} problem={props.find?.problem} />
      <FilterForm filters={props.filters} projects={props.projects} refused={props.refused} />
      <LiveUpdates live={props.live} />
      <section id="runs" data-live aria-label={props.cursor ? "Older runs" : "Runs, newest first"}>
        {!props.refused && <RunList runs={props.runs} empty={filtered ? "No run matches these filters." : "No runs yet."} />}
        <p class="paging">
          {props.cursor && <a href={runsHref(props.filters)}>Newest runs</a>}{" "}
          {props.next && <a href={runsHref(props.filters, props.next)} rel="next">Older runs</a>}
        </p>
      </section>
    </Layout>
  );
}
