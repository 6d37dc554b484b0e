// The run state machine as data: one table for all three specs (../shared/DESIGN.md, "The run
// state machine"; ../shared/spec/run-lifecycle.md, "State transitions").

import { RUN_STATES } from "../protocol/runs";

// The list of states is part of the contract (src/protocol/runs.ts); the transitions are the domain's.
export { RUN_STATES };

export type RunState = (typeof RUN_STATES)[number];

export const TRANSITIONS: Readonly<Record<RunState, readonly RunState[]>> = {
  queued: ["claimed", "publishing", "paused", "blocked", "cancelled"],
  // claimed -> paused: a continuation whose checkpoint did not verify on the claiming machine.
  claimed: ["implementing", "queued", "paused", "failed", "cancelled"],
  implementing: ["pausing", "blocked", "publishing", "completed", "failed", "cancelled"],
  pausing: ["paused", "blocked", "failed", "cancelled"],
  paused: ["queued", "blocked", "cancelled"],
  blocked: ["queued", "cancelled"],
  publishing: ["completed", "paused", "failed"],
  completed: [],
  failed: [],
  cancelled: [],
};

export const TERMINAL_STATES: readonly RunState[] = ["completed", "failed", "cancelled"];

/** States in which a machine holds the run's current attempt. */
export const HELD_STATES: readonly RunState[] = ["claimed", "implementing", "pausing"];

export function isTerminal(state: RunState): boolean {
  return TERMINAL_STATES.includes(state);
}

export function canTransition(from: RunState, to: RunState): boolean {
  return TRANSITIONS[from].includes(to);
}

export function isRunState(value: string): value is RunState {
  return (RUN_STATES as readonly string[]).includes(value);
}

/** The terminal state a run event records (a `run.state` event into completed, failed or cancelled), or null. */
export function terminalStateOf(event: { type: string; data?: Record<string, unknown> | null }): RunState | null {
  if (event.type !== "run.state") return null;
  const to = event.data?.to;
  return typeof to === "string" && isRunState(to) && isTerminal(to) ? to : null;
}
