/** @jsxImportSource hono/jsx */
// The dashboard's autopilot projects list (GET /v1/autopilot/projects, each project's scheduler
// beside it) and what the autopilot pages share: a project's tracker in words, an issue's name
// (ENG-12 linking to Linear for a Linear project's, #12 for GitHub's) and a door's last error. The
// project's page is autopilot-project-page.tsx, a ticket's autopilot-ticket-page.tsx.

import { DataTable } from "./components";
import { at, Layout } from "./layout";
import { gateName, schedulerState } from "./autopilot-scheduler-section";
import { DASH } from "./session";

type Json = Record<string, any>;

/** Where a project's issues come from, in words: the repository's issues, or a Linear team (and project). */
export function trackerName(p: Json): string {
  const t = p.tracker;
  if (t?.kind !== "linear") return `GitHub Issues of ${p.repository}`;
  return `Linear team ${t.team} of ${t.workspace}${t.project ? `, project ${t.project}` : ""}`;
}

/** What makes an issue ready, in words: its label, or (Linear) its workflow state. */
export const readyMarker = (p: Json) => (p.tracker?.kind === "linear" && p.tracker.ready_state ? <>moved to <code>{p.tracker.ready_state}</code></> : <>labeled <code>{p.ready_label}</code></>);

/**
 * An issue as people name it, from its ticket key: ENG-12 for a Linear ticket
 * (`linear:<workspace>/<TEAM-12>`), #12 for GitHub's; and where its page is.
 */
export function issueLabel(key: string, number: number): { name: string; where: string } {
  const linear = /^linear:[^/]+\/([A-Za-z0-9_]+-\d+)$/.exec(key);
  return linear ? { name: linear[1], where: "in Linear" } : { name: `#${number}`, where: "on GitHub" };
}

export const ticketHref = (projectId: string, number: number) => `${DASH}/autopilot/${projectId}/tickets/${number}`;

/** The issue number a ticket key ends in (#12 of GitHub's, 12 of Linear's ENG-12): its ticket page's path. */
const keyNumber = (key: string) => Number(/(\d+)$/.exec(key)?.[1] ?? 0);

/**
 * An issue's name linking to its ticket page (ENG-12 for a Linear ticket, #12 for GitHub's), with
 * "in Linear" or "on GitHub" beside it linking to the issue's page when the API gave it (an http or
 * https address only: a run's copy of it came from the tracker's answer).
 */
export function IssueName(props: { projectId: string; ticketKey: string; number?: number; issueUrl?: string | null }) {
  const number = props.number ?? keyNumber(props.ticketKey);
  const { name, where } = issueLabel(props.ticketKey, number);
  const url = props.issueUrl && /^https?:\/\//i.test(props.issueUrl) ? props.issueUrl : null;
  return <><a href={ticketHref(props.projectId, number)}>{name}</a>{url && <> <a class="muted" href={url} rel="noreferrer">{where}</a></>}</>;
}

/** A door's last failure to read the tracker, in words; the issue it was reading links to its ticket. */
export function LastError(props: { error: Json | null; projectId: string; none: string }) {
  const { error } = props;
  if (!error) return <p id="last-error" class="muted">{props.none}</p>;
  const issue = typeof error.number === "number" ? <> (issue <a href={ticketHref(props.projectId, error.number)}>#{error.number}</a>)</> : null;
  return (
    <p id="last-error" class="error">
      {at(error.at_ms)}, {error.door}{issue}: {error.failure}. <span>{error.message}</span>
    </p>
  );
}

/** A scheduler's standing as a list cell: a sign and a word; "—" when it could not be read. */
function SchedulerCell(props: { scheduler: Json | null }) {
  if (!props.scheduler) return <span class="muted">—</span>;
  const state = schedulerState(props.scheduler);
  return <span class={state.tone}>{state.sign} {state.word}</span>;
}

/** Which gates hold a new run now, with why; "all open" when none does. */
function GatesCell(props: { scheduler: Json | null }) {
  if (!props.scheduler) return <span class="muted">—</span>;
  const closed = (props.scheduler.verdicts as Json[]).filter((v) => !v.open);
  if (closed.length === 0) return <span class="ok">✓ All open</span>;
  return <span class="bad">✗ {closed.map((v) => `${gateName(v.gate)}: ${v.reason}`).join("; ")}</span>;
}

/** `schedulers` holds each listed project's scheduler by project id. */
export function AutopilotProjectsPage(props: { projects: Json[]; schedulers: Map<string, Json>; admin: boolean }) {
  return (
    <Layout title="Autopilot" signedIn admin={props.admin} section="autopilot">
      <h1>Autopilot projects</h1>
      {props.admin && <p><a href={`${DASH}/autopilot/new`}>New autopilot project</a></p>}
      {props.projects.length === 0 ? (
        <p class="muted">
          No autopilot project is configured. An admin creates one here ("New autopilot project") or with POST /v1/autopilot/projects (the API
          reference is at <a href="/docs">/docs</a>): a GitHub repository or a Linear team, the GitHub App Docket acts as, and what its runs launch.
        </p>
      ) : (
        <DataTable
          id="projects"
          rows={props.projects}
          columns={[
            { label: "Project", cell: (p: Json) => <a href={`${DASH}/autopilot/${p.id}`}>{p.name}</a> },
            { label: "Tracker", cell: (p: Json) => trackerName(p) },
            { label: "Repository", cell: (p: Json) => p.repository },
            { label: "Ready when", cell: (p: Json) => readyMarker(p) },
            { label: "Scheduler", class: "state", cell: (p: Json) => <SchedulerCell scheduler={props.schedulers.get(p.id) ?? null} /> },
            { label: "Gates", cell: (p: Json) => <GatesCell scheduler={props.schedulers.get(p.id) ?? null} /> },
            { label: "Queue capacity", cell: (p: Json) => p.queue_capacity },
          ]}
        />
      )}
    </Layout>
  );
}
