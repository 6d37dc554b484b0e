/** @jsxImportSource hono/jsx */
// A project's scheduler on its page (GET /v1/autopilot/projects/:id/scheduler; docs/autopilot.md,
// "The scheduler"): enabled, disabled or draining, each gate's verdict on a new run with its reason,
// the window, the slots and the budget; an admin enables, drains or disables it. Draining and
// disabling stop admission (disabling also pauses executing runs), so each asks for a confirmation.

import { ConfirmBox, DataTable } from "./components";
import { at, cents } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

/** The scheduler's standing in a word, with a sign beside it so it never rests on colour alone. */
export function schedulerState(s: Json): { word: string; sign: string; tone: string } {
  if (!s.enabled) return { word: "Disabled", sign: "■", tone: "bad" };
  if (s.draining) return { word: "Draining", sign: "◐", tone: "warn" };
  return { word: "Enabled", sign: "▶", tone: "ok" };
}

const GATE_NAMES: Record<string, string> = { enabled: "Enabled", drain: "Drain", window: "Dispatch window", concurrency: "Concurrency", budget: "Budget" };

/** A gate's name in words. */
export const gateName = (gate: string) => GATE_NAMES[gate] ?? gate;

function windowText(w: Json | null): string {
  if (!w) return "Always open";
  return `${w.days.join(", ")} ${w.start}–${w.end} (${w.time_zone})${w.end < w.start ? ", overnight" : ""}`;
}

function budgetText(b: Json | null): string {
  if (!b) return "None: runs reserve nothing";
  const reset = b.reset_at_ms === null ? "" : `, reset ${at(b.reset_at_ms)}`;
  return `${cents(b.left_cents)} left of ${cents(b.limit_cents)} (${cents(b.per_run_cents)} a run; ${cents(b.held_cents)} held, ${cents(b.spent_cents)} spent${reset})`;
}

function concurrencyText(c: Json): string {
  return `${c.in_use} of ${c.limit} slots in use${c.configured === null ? " (the deployment's default)" : ""}`;
}

function Verdicts(props: { verdicts: Json[] }) {
  return (
    <DataTable
      id="gates"
      caption="Each gate on a new run now"
      rows={props.verdicts}
      columns={[
        { label: "Gate", cell: (v: Json) => gateName(v.gate) },
        { label: "Verdict", class: "state", cell: (v: Json) => (v.open ? <span class="ok">✓ Open</span> : <span class="bad">✗ Closed</span>) },
        { label: "Why", cell: (v: Json) => v.reason },
      ]}
    />
  );
}

/** One scheduler command's button; drain and disable carry the confirmation box. */
function Command(props: { projectId: string; projectName: string; command: "enable" | "drain" | "disable"; warning?: string }) {
  const label = props.command[0].toUpperCase() + props.command.slice(1);
  return (
    <form class="inline" method="post" action={`${DASH}/autopilot/${props.projectId}/scheduler/${props.command}`}>
      {props.warning && <><ConfirmBox warning={props.warning} />{" "}</>}
      <button type="submit" class={props.warning ? "danger" : undefined} aria-label={`${label} the scheduler of ${props.projectName}`}>{label}</button>
    </form>
  );
}

function Commands(props: { scheduler: Json; projectName: string }) {
  const s = props.scheduler;
  const common = { projectId: s.project_id, projectName: props.projectName };
  return (
    <div id="scheduler-actions">
      {(!s.enabled || s.draining) && <Command {...common} command="enable" />}{" "}
      {s.enabled && !s.draining && <Command {...common} command="drain" warning="admit nothing new and start no queued run; running work finishes" />}{" "}
      {s.enabled && <Command {...common} command="disable" warning="admit nothing new, start no queued run and pause the executing ones" />}
    </div>
  );
}

export function SchedulerSection(props: { scheduler: Json; projectName: string; admin: boolean }) {
  const s = props.scheduler;
  const state = schedulerState(s);
  return (
    <section id="scheduler" aria-labelledby="scheduler-heading">
      <h2 id="scheduler-heading">Scheduler</h2>
      <p id="scheduler-state" class="state">
        <span class={state.tone}>{state.sign} {state.word}</span>
        {s.admission.open ? ": admits ready issues" : `: admits nothing (${s.admission.reason})`}
      </p>
      <dl id="scheduler-gates">
        <dt>Dispatch window</dt><dd>{windowText(s.window)}</dd>
        <dt>Concurrency</dt><dd>{concurrencyText(s.concurrency)}</dd>
        <dt>Budget</dt><dd>{budgetText(s.budget)}</dd>
      </dl>
      <Verdicts verdicts={s.verdicts} />
      {props.admin && <Commands scheduler={s} projectName={props.projectName} />}
    </section>
  );
}
