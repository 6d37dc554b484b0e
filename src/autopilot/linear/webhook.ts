// The Linear webhook door's first half (../shared/spec/run-lifecycle.md, "Admission"): verify a
// delivery with @linear/sdk's own LinearWebhookClient and read which Linear issues it names. The
// slow half (reading the issue, the ticket's decision) runs from the AUTOPILOT queue, as the GitHub
// door's does, so Linear is answered at once.

import { LinearWebhookClient } from "@linear/sdk/webhooks";
import type { ActorEvidence } from "../provider";

/** The resource types a Linear project's webhook subscribes to; others are acknowledged and ignored. */
export const LINEAR_WEBHOOK_TYPES = ["Issue", "Comment", "IssueRelation"] as const;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const text = (v: unknown): string | null => (typeof v === "string" && v !== "" ? v : null);

/**
 * The delivery's payload when `signature` (Linear-Signature) is the hex HMAC-SHA256 of `body` with
 * `secret` and the signed body's webhookTimestamp is within a minute of now (LinearWebhookClient's
 * replay check); else null. A missing header, a bad signature, a stale or missing timestamp and a
 * body that is not JSON are all simply not a delivery: never a 500 here.
 */
export function verifiedLinearPayload(secret: string, body: string, signature: string | undefined): Json | null {
  if (!signature) return null;
  try {
    const payload: unknown = new LinearWebhookClient(secret).parseData(Buffer.from(body, "utf8"), signature);
    return isObject(payload) ? payload : null;
  } catch {
    return null;
  }
}

/** One Linear issue a delivery names, for admission. */
export interface LinearWebhookTicket {
  /** The issue's id (a UUID), what the tracker reads it by. */
  issueId: string;
  /** ENG-12, when the payload says. */
  identifier: string | null;
  /** The sender, as evidence only when this delivery is the issue's ready transition; else null. */
  sender: ActorEvidence | null;
}

/** What makes an issue ready in a project: a label, or a workflow state (names compare without case). */
export interface LinearReadiness {
  readyLabel: string | null;
  readyState: string | null;
}

/**
 * The issues a verified delivery names: the issue of an Issue create or update, the issue a Comment
 * is on, and the blocked issue of a "blocks" IssueRelation (its blockers changed). Empty when the
 * payload names none (another relation type, a comment on a project).
 */
export function linearTicketsOfDelivery(payload: Json, readiness: LinearReadiness): LinearWebhookTicket[] {
  const data = isObject(payload.data) ? payload.data : null;
  if (!data) return [];
  const ticket = (issueId: string | null, identifier: string | null, sender: ActorEvidence | null = null) => (issueId ? [{ issueId, identifier, sender }] : []);
  if (payload.type === "Issue") {
    const sender = readyTransition(payload, data, readiness) ? actorEvidence(payload.actor) : null;
    return ticket(text(data.id), text(data.identifier), sender);
  }
  if (payload.type === "Comment") return ticket(text(data.issueId), isObject(data.issue) ? text(data.issue.identifier) : null);
  if (payload.type === "IssueRelation" && data.type === "blocks") {
    return ticket(text(data.relatedIssueId), isObject(data.relatedIssue) ? text(data.relatedIssue.identifier) : null);
  }
  return [];
}

/** Whether an Issue delivery is the ready label's addition, or the move into the ready state. */
function readyTransition(payload: Json, data: Json, readiness: LinearReadiness): boolean {
  const from = isObject(payload.updatedFrom) ? payload.updatedFrom : null;
  if (payload.action !== "update" || !from) return false;
  const same = (a: unknown, b: string | null) => typeof a === "string" && b !== null && a.toLowerCase() === b.toLowerCase();
  if (Array.isArray(from.labelIds) && Array.isArray(data.labels)) {
    const ready = data.labels.find((l) => isObject(l) && same(l.name, readiness.readyLabel));
    if (isObject(ready) && !from.labelIds.includes(ready.id)) return true;
  }
  return typeof from.stateId === "string" && isObject(data.state) && same(data.state.name, readiness.readyState);
}

/**
 * The webhook's `actor` as admission weighs a sender: a person is a User by their email (or name);
 * an OAuth application and an integration are automation, named by what they are, never a User.
 */
function actorEvidence(actor: unknown): ActorEvidence | null {
  if (!isObject(actor)) return null;
  const type = text(actor.type) ?? "unknown";
  if (type === "user") {
    const login = text(actor.email) ?? text(actor.name);
    return login ? { login, type: "User", viaApp: null } : null;
  }
  const name = text(actor.name) ?? text(actor.service) ?? text(actor.id) ?? "an app";
  return { login: name, type: type === "integration" ? "Integration" : "Application", viaApp: name };
}
