// Pause and checkpoint (docs/protocol.md, "Pause and resume"): the daemon's checkpoint of a pausing
// attempt is stored with its patch and session beside the run, handed whole to the machine that
// claims the continuation, and verified against its stored work by recovery.

import { refusal, type Refusal } from "../../src/errors";
import type { ClaimGrant } from "../../src/protocol/runners";
import type { Checkpoint, RunRecord } from "../../src/run/types";
import { attemptView } from "../../src/run/view";
import type { AttemptAnswer, RunCore } from "./core";
import { finishPending } from "./pending";

/**
 * The daemon's checkpoint of a pausing attempt, authorized by the run-attempt token of attempt
 * `attempt`: its description goes on the run, its patch and session beside it, in one transaction.
 */
export async function storeCheckpoint(
  core: RunCore,
  token: string,
  attempt: number,
  input: { checkpoint: Omit<Checkpoint, "attempt" | "atMs">; patch: string; session: string | null },
): Promise<AttemptAnswer | Refusal> {
  const row = await core.attemptOfToken(token);
  if (!row || row.attempt !== attempt) return refusal("unauthorized", `the run-attempt token is not valid for attempt ${attempt} of this run`);
  const checkpoint: Checkpoint = { ...input.checkpoint, attempt, atMs: Date.now() };
  const result = core.apply({ type: "checkpoint", attempt, checkpoint }, { alsoWrite: () => core.checkpoints.write(input.patch, input.session) });
  if ("error" in result) return result;
  await finishPending(core, { notify: true });
  return attemptView(result.run);
}

/** A continuation's checkpoint, whole, for the machine that claimed it; null for new work. */
export function grantCheckpoint(core: RunCore, run: RunRecord): ClaimGrant["checkpoint"] {
  const c = run.checkpoint;
  if (!c || run.continuation !== "implementing") return null;
  const { patch, session } = core.checkpoints.read();
  return {
    attempt: c.attempt,
    session_id: c.sessionId,
    last_phase: c.lastPhase,
    pending_actions: c.pendingActions,
    session,
    patch,
    source_revision: c.sourceRevision,
    note: c.note,
    at_ms: c.atMs,
  };
}

/** A paused run continues only from a checkpoint whose stored work and session are whole. */
export function verifyStoredCheckpoint(core: RunCore, run: RunRecord): { observed: string; problem: string | null } {
  const checkpoint = run.checkpoint;
  if (run.continuation === "publishing") return { observed: "a paused publication: its branch and pull request are reconciled when it resumes", problem: null };
  if (!checkpoint) return { observed: "no checkpoint stored", problem: null };
  const { patch, session } = core.checkpoints.read();
  const whole = patch.length === checkpoint.patchChars && (checkpoint.sessionChars === null || session?.length === checkpoint.sessionChars);
  if (whole) return { observed: `checkpoint of attempt ${checkpoint.attempt} verified against its stored work`, problem: null };
  return { observed: `checkpoint of attempt ${checkpoint.attempt} failed verification`, problem: "recovery found the checkpoint's stored work or session incomplete" };
}
