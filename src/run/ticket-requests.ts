// What a run asks of its tracker ticket, as outbox event data: a comment with the blocker, the
// review label, a comment linking the pull request, a comment saying why the run failed (docs/protocol.md, "Tracker deliveries"). Pure:
// the run's transition rules (decide.ts) emit the event in the run's own transaction; src/tracker/deliver.ts performs it.

import type { BlockerReport, RunRecord } from "./types";

export const TRACKER_DELIVERY_EVENT = "run.tracker_delivery";

export const DELIVERY_KINDS = ["blocker_comment", "review_label", "pr_comment", "failure_comment"] as const;
export type DeliveryKind = (typeof DELIVERY_KINDS)[number];

/** The event's data: the kind, the ticket, the project whose provider performs it, and the kind's own fields. */
export interface DeliveryRequest {
  kind: DeliveryKind;
  ticket_key: string;
  project_id: string;
  /** blocker_comment, failure_comment: the comment's text (without the marker). */
  body?: string;
  /** pr_comment, review_label: the pull request (publication). */
  pr_url?: string;
  pr_number?: number;
  /** blocker_comment: the attempt whose blocker it is; a later attempt's blocker supersedes it. */
  attempt?: number;
}

/**
 * The delivery a run of autopilot asks for, or null for a run without a ticket (a plain API run
 * keeps its blocker on the run only).
 */
export function deliveryFor(run: RunRecord, kind: DeliveryKind, fields: Omit<DeliveryRequest, "kind" | "ticket_key" | "project_id">): DeliveryRequest | null {
  const projectId = run.metadata.autopilot_project;
  if (!run.ticketKey || !projectId) return null;
  return { kind, ticket_key: run.ticketKey, project_id: projectId, ...fields };
}

/** The blocker as a tracker comment: what stops the agent, the evidence, the questions, the action needed. */
export function blockerCommentBody(runId: string, blocker: BlockerReport): string {
  const list = (items: string[]) => (items.length === 0 ? ["- (none)"] : items.map((item) => `- ${item}`));
  return [
    `**Docket run ${runId} is blocked.**`,
    "",
    blocker.summary,
    "",
    "**Evidence**",
    ...list(blocker.evidence),
    "",
    "**Questions**",
    ...list(blocker.questions),
    "",
    "**What a person needs to do**",
    blocker.humanAction,
    "",
    "Answer in a comment; the run continues only when a person makes the issue ready again (removes and adds the ready label).",
  ].join("\n");
}

/** Why the run failed, on its issue: the issue still carries its ready label, so say how to try again. */
export function failureCommentBody(runId: string, error: string | null): string {
  return [
    `**Docket run ${runId} failed.**`,
    "",
    error ?? "The run ended failed without a reason.",
    "",
    "Nothing was published. To try again, a person makes the issue ready again (removes and adds the ready label).",
  ].join("\n");
}
