// The webhook door's first half: verify GitHub's signature and read which ticket a delivery is
// about (../shared/spec/run-lifecycle.md, "Admission"). The slow half (the tracker's facts, the
// ticket's decision) runs from the AUTOPILOT queue, so GitHub is answered well inside its 10 s.

import { Webhooks } from "@octokit/webhooks";
import { DocketError } from "../errors";
import { issueFacts, type GitHubIssue } from "./github/issues";
import type { ActorEvidence, IssueFacts, TicketRef } from "./provider";

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
  /** The issue as the signed payload states it; null when it states too little (or too much) to judge by. */
  issue: SignedIssue | null;
}

/** An issue's facts without its identity, as a delivery carries them to admission (src/autopilot/queue.ts). */
export type SignedIssue = Omit<IssueFacts, "ref">;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The ticket a delivery names: the issue of `issues` and `issue_comment`, the blocked issue of
 * `issue_dependencies` (its blockers changed). Null when the payload names none.
 */
export function ticketOfDelivery(event: string, payload: unknown, readyLabel: string, factsMaxBytes: number): WebhookTicket | null {
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
    // A deleted or transferred issue is gone from the repository: admission reads that it is.
    issue: action === "deleted" || action === "transferred" ? null : signedIssue(issue, { provider: "github", repository, number: issue.number as number }, factsMaxBytes),
  };
}

/**
 * What admission judges an issue by (its title, body, labels, state and update time), as the
 * payload states it: the delivery is signed with the project's secret, so the webhook door need not
 * read the issue again (docs/autopilot.md, "What Docket reads"). Null for a pull request, an issue
 * object missing one of those fields, or facts over AUTOPILOT_WEBHOOK_FACTS_MAX_BYTES: admission
 * then reads the issue from GitHub.
 */
function signedIssue(issue: Json, ref: TicketRef, maxBytes: number): SignedIssue | null {
  const labels = Array.isArray(issue.labels) ? issue.labels : null;
  if (issue.pull_request !== undefined && issue.pull_request !== null) return null;
  if (typeof issue.title !== "string" || typeof issue.state !== "string" || typeof issue.html_url !== "string" || typeof issue.repository_url !== "string") return null;
  if (!(issue.body === null || typeof issue.body === "string") || (issue.state_reason !== undefined && issue.state_reason !== null && typeof issue.state_reason !== "string")) return null;
  if (typeof issue.updated_at !== "string" || !Number.isFinite(Date.parse(issue.updated_at))) return null;
  if (!labels || !labels.every((l) => isObject(l) && typeof l.name === "string")) return null;
  const { title, body, state, stateReason, labels: names, url, updatedAtMs } = issueFacts(issue as unknown as GitHubIssue, ref);
  const facts: SignedIssue = { title, body, state, stateReason, labels: names, url, updatedAtMs };
  return new TextEncoder().encode(JSON.stringify(facts)).byteLength <= maxBytes ? facts : null;
}
