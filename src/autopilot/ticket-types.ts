// What admission and a ticket's Durable Object say to each other (durable-objects/ticket-object.ts):
// the observation a door hands the ticket, the ticket's answer, and the ticket as GET …/tickets
// shows it. Domain types, so admission names them without importing the object.

import type { DispatchInput } from "../run/dispatch";
import type { EligibilityResult, ReadinessResult } from "./deps";
import type { GitHubFailure } from "./github/errors";
import type { IssueFacts, ReadyTransition } from "./provider";

/** Which ticket a caller means: its object's name, and the key it was kept under before (durable-objects/ticket-carry-over.ts). */
export interface TicketAddress {
  projectId: string;
  /** `github:owner/repo#12`, the repository spelt as the project spells it. */
  ticketKey: string;
}

/** Which of the four doors an observation came through; all obey the same policy. */
export type AdmissionDoor = "webhook" | "reconcile" | "startup" | "operator";

/**
 * Why a door could not read the tracker: kept by the project, and by the ticket whose issue it was reading
 * (src/autopilot/last-error.ts records it).
 */
export interface TrackerLastError {
  at_ms: number;
  door: AdmissionDoor;
  /** The GitHubError's failure, or `error` for anything else. */
  failure: GitHubFailure | "error";
  message: string;
}

/** What one door learned about the ticket, with the rules already applied by the Worker. */
export interface Observation {
  project: { id: string; orgId: string; queueCapacity: number };
  ticketKey: string;
  number: number;
  door: AdmissionDoor;
  /** X-GitHub-Delivery of a webhook; null for reconciliation and operators. */
  deliveryId: string | null;
  facts: IssueFacts | null;
  eligibility: EligibilityResult;
  /**
   * The latest addition of the ready label the tracker records: its id is the readiness generation.
   * Without a record, the webhook delivery the trusted-actor assumption accepted (src/autopilot/admission.ts).
   */
  transition: ReadyTransition | null;
  /** The human-readiness verdict on that transition, or on a labeled webhook's sender alone; else null. */
  readiness: ReadinessResult | null;
  /** The run to create when this observation admits one. */
  dispatch: DispatchInput;
  /**
   * Set by reconciliation when the project's queue was full as it saw the issue in the ready list,
   * and it read nothing more of it (src/autopilot/reconcile-waiting.ts): the ticket records a capacity
   * wait with this reason, unless it holds a run or an admission under way.
   */
  capacityWait?: string;
}

export type TicketStatus = "idle" | "admitting" | "admitted" | "refused" | "capacity_wait" | "lapsed" | "done";

export type ObservationOutcome =
  | "duplicate_delivery"
  | "admitted"
  | "already_admitted"
  | "unchanged"
  | "refused"
  | "capacity_wait"
  | "lapsed"
  | "authorized";

export interface ObservationAnswer {
  outcome: ObservationOutcome;
  runId: string | null;
  reasons: string[];
}

export interface TicketHistoryEntry {
  at_ms: number;
  kind: "admitted" | "refused" | "capacity_wait" | "lapsed" | "run_ended" | "authorized";
  /** `withdraw_retry`: the ticket's alarm finished a lapse whose withdrawal had failed. */
  door: AdmissionDoor | "withdraw_retry" | "run_end";
  generation: string | null;
  run_id: string | null;
  reasons: string[];
  basis: string | null;
  actor: string | null;
}

export interface TicketState {
  ticket_key: string;
  project_id: string;
  status: TicketStatus;
  reasons: string[];
  generation: string | null;
  admitted_generation: string | null;
  run_id: string | null;
  updated_at_ms: number;
  /** A recorded lapse whose run is not withdrawn yet (a claim of that run is refused and cancels it). */
  withdrawal: { run_id: string; reason: string; attempts: number } | null;
  history: TicketHistoryEntry[];
  /** The last time a door could not read (or admit) this issue; null once a later observation read it. */
  last_error: TrackerLastError | null;
}

/** The ticket's answer to a claim of one of its runs (RunObject.claimCounted). */
export type BackingAnswer = { backs: true } | { backs: false; reason: string } | { backs: "unknown"; reason: string };
