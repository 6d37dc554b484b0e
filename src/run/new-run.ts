// A run as it is first stored: queued, attempt 0, version 1. Pure, so the run object and tests of
// the transition rules start from the same record.

import type { RunRecord } from "./types";

export type NewRun = Omit<
  RunRecord,
  | "state"
  | "attempt"
  | "version"
  | "continuation"
  | "hold"
  | "machineId"
  | "sandboxId"
  | "phase"
  | "claimedAtMs"
  | "launchedAtMs"
  | "leaseExpiresAtMs"
  | "launchDeadlineAtMs"
  | "lastReportAtMs"
  | "queuedAtMs"
  | "notBeforeMs"
  | "stopRequest"
  | "lastError"
  | "blocker"
  | "artifact"
  | "costCents"
  | "steps"
  | "stateHistory"
  | "stateHistoryDropped"
  | "updatedAtMs"
  | "endedAtMs"
>;

export function newQueuedRun(input: NewRun, now: number): RunRecord {
  return {
    ...input,
    state: "queued",
    attempt: 0,
    version: 1,
    continuation: null,
    hold: false,
    machineId: null,
    sandboxId: null,
    phase: null,
    claimedAtMs: null,
    launchedAtMs: null,
    leaseExpiresAtMs: null,
    launchDeadlineAtMs: null,
    lastReportAtMs: null,
    queuedAtMs: now,
    notBeforeMs: now,
    stopRequest: null,
    lastError: null,
    blocker: null,
    artifact: null,
    costCents: null,
    steps: [],
    stateHistory: [],
    stateHistoryDropped: 0,
    updatedAtMs: now,
    endedAtMs: null,
  };
}
