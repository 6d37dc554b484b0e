/** @jsxImportSource hono/jsx */
// What an operator can do to a run from its page, each offered only in the states where the API
// takes it (docs/protocol.md, "Runs", "Pause and resume"; ../shared/DESIGN.md, "The run state
// machine"), so a button never leads to a refusal the page could have foreseen.

import { ConfirmBox } from "./components";
import { DASH } from "./session";

type Json = Record<string, any>;

/** Pause sets the operator's hold: a queued, implementing or publishing run, or a paused or pausing one the scheduler paused (no hold yet). */
function canPause(run: Json): boolean {
  if (run.state === "pausing" || run.state === "paused") return !run.hold;
  return run.state === "queued" || run.state === "implementing" || run.state === "publishing";
}

/** Resume: a paused run that can continue (a run that executed without a checkpoint cannot: its recovery problem says why). */
function canResume(run: Json): boolean {
  return run.state === "paused" && !run.recovery_problem;
}

/** Cancel: any run that has not ended, but a publishing one (cancel it once it is paused or has ended), and only once. */
function canCancel(run: Json): boolean {
  return run.ended_at_ms === null && run.state !== "publishing" && !run.stop_request;
}

function ReasonField(props: { id: string; label: string }) {
  return (
    <>
      <label for={props.id}>{props.label}</label> <input id={props.id} name="reason" type="text" maxlength={500} />{" "}
    </>
  );
}

/** The run's actions (pause, resume, cancel); none on an ended run. */
export function RunActions(props: { run: Json }) {
  const { run } = props;
  const action = (what: string) => `${DASH}/runs/${run.id}/${what}`;
  if (!canPause(run) && !canResume(run) && !canCancel(run)) return <></>;
  return (
    <section id="run-actions" aria-label="Actions">
      {canPause(run) && (
        <form method="post" action={action("pause")}>
          <ReasonField id="pause-reason" label="Reason to pause" />
          <button type="submit" aria-label={`Pause run ${run.id}`}>Pause run</button>{" "}
          <span class="muted">{run.state === "implementing" ? "The agent stops at a checkpoint; the run stays paused until resumed." : "The run stays paused until resumed."}</span>
        </form>
      )}
      {canResume(run) && (
        <form method="post" action={action("resume")}>
          <button type="submit" aria-label={`Resume run ${run.id}`}>Resume run</button>{" "}
          <span class="muted">{run.checkpoint ? `Continues from its checkpoint (phase ${run.checkpoint.last_phase ?? "unknown"}).` : "Goes back to the queue."}</span>
        </form>
      )}
      {run.state === "paused" && run.recovery_problem && <p class="bad">Cannot resume: {run.recovery_problem}</p>}
      {canCancel(run) && (
        <form method="post" action={action("cancel")}>
          <ReasonField id="cancel-reason" label="Reason to cancel" />
          <ConfirmBox warning="Cancel this run: it ends cancelled and never runs again." />{" "}
          <button type="submit" class="danger" aria-label={`Cancel run ${run.id}`}>Cancel run</button>
        </form>
      )}
    </section>
  );
}
