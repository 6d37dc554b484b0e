// A blocker between the wire (snake_case, src/protocol/runs.ts BlockerReport) and the run record
// (docs/protocol.md, "Blockers").

import type { BlockerReport as WireBlocker } from "../protocol/runs";
import type { BlockerReport, RunRecord } from "./types";

export function blockerFromWire(wire: WireBlocker): BlockerReport {
  return { summary: wire.summary, evidence: wire.evidence, questions: wire.questions, humanAction: wire.human_action };
}

/** The stored blocker in the API's words; a run stored before blockers had a structure reads as none. */
export function blockerView(blocker: RunRecord["blocker"] | string | undefined) {
  if (!blocker || typeof blocker !== "object") return null;
  return {
    summary: blocker.summary,
    evidence: blocker.evidence,
    questions: blocker.questions,
    human_action: blocker.humanAction,
    attempt: blocker.attempt,
    at_ms: blocker.atMs,
  };
}
