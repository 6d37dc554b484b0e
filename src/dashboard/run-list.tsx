/** @jsxImportSource hono/jsx */
// A list of runs as GET /v1/runs gives them: each run's title, state (a word and an icon beside its
// colour), duration, repository, project, machine and attempt. A table on a wide window, a card
// per run on a phone (DataTable).

import { DataTable, type Column } from "./components";
import { at } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

/** Each state's icon and colour class (layout.tsx); the word is always shown beside them. */
const STATE_LOOK: Record<string, { icon: string; tone: string }> = {
  queued: { icon: "○", tone: "muted" },
  claimed: { icon: "▶", tone: "" },
  implementing: { icon: "▶", tone: "" },
  publishing: { icon: "▶", tone: "" },
  pausing: { icon: "⏸", tone: "warn" },
  paused: { icon: "⏸", tone: "warn" },
  blocked: { icon: "⚠", tone: "warn" },
  completed: { icon: "✓", tone: "ok" },
  failed: { icon: "✗", tone: "bad" },
  cancelled: { icon: "⊘", tone: "muted" },
};

/** A run's state: its icon (hidden from screen readers, which read the word) and its word, in its colour. */
export function StateBadge(props: { state: string }) {
  const look = STATE_LOOK[props.state] ?? { icon: "•", tone: "" };
  return (
    <span class={`state ${look.tone}`.trim()} data-state={props.state}>
      <span aria-hidden="true">{look.icon}</span> {props.state}
    </span>
  );
}

/** A length of time in words: "45s", "3m 12s", "2h 05m". */
export function lasting(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** From the first claim to the end, or to now while the run goes on; a dash before its first claim. */
export function runDuration(run: Json, nowMs: number): string {
  if (typeof run.started_at_ms !== "number") return "—";
  if (typeof run.ended_at_ms === "number") return lasting(run.ended_at_ms - run.started_at_ms);
  return `${lasting(nowMs - run.started_at_ms)} so far`;
}

/** A repository's URL without its scheme and `.git`, which say nothing a reader needs. */
export function repositoryName(url: string | null | undefined): string {
  return url ? url.replace(/^[a-z+]+:\/\//, "").replace(/\.git$/, "") : "—";
}

/** A run's link: its title (its id when it has none), its id beside it. */
export function RunLink(props: { run: Json }) {
  const href = `${DASH}/runs/${props.run.id}`;
  if (!props.run.title) return <a href={href}>{props.run.id}</a>;
  return (
    <>
      <a href={href}>{props.run.title}</a> <span class="muted">{props.run.id}</span>
    </>
  );
}

/** A value that, followed, filters the runs list by it (a run's `project_id`), or a dash. */
export function FilterLink(props: { name: string; value: string | null | undefined }) {
  if (!props.value) return <span class="muted">—</span>;
  return <a href={`${DASH}/runs?${new URLSearchParams({ [props.name]: props.value })}`}>{props.value}</a>;
}

function runColumns(nowMs: number): Column<Json>[] {
  return [
    { label: "Run", cell: (r) => <RunLink run={r} /> },
    { label: "State", cell: (r) => <StateBadge state={r.state} /> },
    { label: "Duration", cell: (r) => runDuration(r, nowMs) },
    { label: "Repository", cell: (r) => repositoryName(r.repository) },
    { label: "Project", cell: (r) => <FilterLink name="project_id" value={r.project_id} /> },
    { label: "Machine", cell: (r) => (r.machine_id ? <a href={`${DASH}/runners/${r.machine_id}`}>{r.machine_id}</a> : <span class="muted">—</span>) },
    { label: "Attempt", cell: (r) => String(r.attempt) },
    { label: "Dispatched", cell: (r) => at(r.created_at_ms) },
  ];
}

export function RunList(props: { runs: Json[]; empty?: string; nowMs?: number }) {
  if (props.runs.length === 0) return <p class="muted">{props.empty ?? "No runs yet."}</p>;
  return <DataTable columns={runColumns(props.nowMs ?? Date.now())} rows={props.runs} rowAttrs={(r) => ({ "data-run": r.id })} />;
}
