// The webhook door's first half: verify GitHub's signature and read which ticket a delivery is
// about (../shared/spec/run-lifecycle.md, "Admission"). The slow half (the tracker's facts, the
// ticket's decision) runs from the AUTOPILOT queue, so GitHub is answered well inside its 10 s.

import { Webhooks } from "@octokit/webhooks";
import { DocketError } from "../errors";
import type { ActorEvidence } from "./provider";

/** The events a project's webhook subscribes to; others are acknowledged and ignored. */
export const WEBHOOK_EVENTS = ["issues", "issue_comment", "issue_dependencies"] as const;

/**
 * Whether `signature` (X-Hub-Signature-256) signs `body` with the project's secret. A missing or
 * malformed header is simply not valid: Webhooks.verify throws on a malformed one, never a 500 here.
 */
export async function signatureValid(secret: string, body: string, signature: string | undefined): Promise<boolean> {
  if (!signature) return false;
  try {
    return await new Webhooks({ secret }).verify(body, signature);
  } catch {
    return false;
  }
}

/**
 * A delivery's JSON payload. GitHub sends it as the body (content type `application/json`) or, in
 * a webhook's default `application/x-www-form-urlencoded`, URL-encoded in the form field `payload`;
 * either way the signature is over the body as sent, so this reads it only after the check.
 */
export function deliveryPayload(body: string, contentType: string | undefined): unknown {
  const form = (contentType ?? "").split(";")[0].trim().toLowerCase() === "application/x-www-form-urlencoded";
  const json = form ? new URLSearchParams(body).get("payload") : body;
  if (json === null) throw new DocketError("invalid_request", "body: a form-encoded delivery has no payload field", { field: "payload" });
  try {
    return JSON.parse(json);
  } catch {
    throw new DocketError("invalid_request", form ? "payload: not JSON" : "body: not JSON", { field: form ? "payload" : "body" });
  }
}

/** What admission needs from one delivery. */
export interface WebhookTicket {
  repository: string;
  number: number;
  /** The sender, as evidence only when this delivery is the ready label's addition; else null. */
  sender: ActorEvidence | null;
  action: string;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The ticket a delivery names: the issue of `issues` and `issue_comment`, the blocked issue of
 * `issue_dependencies` (its blockers changed). Null when the payload names none.
 */
export function ticketOfDelivery(event: string, payload: unknown, readyLabel: string): WebhookTicket | null {
  if (!isObject(payload)) return null;
  const issue = event === "issue_dependencies" ? (payload.blocked_issue ?? payload.issue) : payload.issue;
  if (!isObject(issue) || !Number.isSafeInteger(issue.number)) return null;
  // The issue's own repository (a blocker may live in another one than the delivery's repository).
  const own = typeof issue.repository_url === "string" ? /\/repos\/([^/]+\/[^/]+)$/.exec(issue.repository_url)?.[1] ?? null : null;
  const repository = own ?? (isObject(payload.repository) && typeof payload.repository.full_name === "string" ? payload.repository.full_name : null);
  if (!repository) return null;
  const action = typeof payload.action === "string" ? payload.action : "";
  const label = isObject(payload.label) && typeof payload.label.name === "string" ? payload.label.name : null;
  const sender = isObject(payload.sender) && typeof payload.sender.login === "string" ? payload.sender : null;
  // Label names compare without case, as GitHub's own do (docs/autopilot.md, "Eligibility").
  const labelsReady = event === "issues" && action === "labeled" && label !== null && label.toLowerCase() === readyLabel.toLowerCase();
  const viaApp = isObject(payload.performed_via_github_app) && typeof payload.performed_via_github_app.slug === "string" ? payload.performed_via_github_app.slug : null;
  return {
    repository,
    number: issue.number as number,
    action,
    sender: labelsReady && sender ? { login: sender.login as string, type: typeof sender.type === "string" ? sender.type : "unknown", viaApp } : null,
  };
}
