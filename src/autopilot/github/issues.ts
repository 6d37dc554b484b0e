// GitHub's REST JSON (API version 2022-11-28) as the provider-neutral facts of src/autopilot/provider.ts.

import type { ActorEvidence, IssueFacts, ReadyTransition, TicketRef } from "../provider";

/** The fields of GitHub's issue object the provider reads. */
export interface GitHubIssue {
  number: number;
  title: string;
  body?: string | null;
  state: string;
  state_reason?: string | null;
  labels?: (string | { name?: string | null })[];
  html_url: string;
  repository_url: string;
  updated_at: string;
  /** Present on a pull request: the issues endpoints answer for pull requests too. */
  pull_request?: unknown;
}

/** The fields of an issue event (`GET …/issues/{n}/events`) the provider reads. */
export interface GitHubIssueEvent {
  id: number;
  event: string;
  created_at: string;
  actor?: { login: string; type: string } | null;
  label?: { name: string } | null;
  performed_via_github_app?: { slug?: string | null; name?: string | null } | null;
}

export function isPullRequest(issue: GitHubIssue): boolean {
  return issue.pull_request !== undefined && issue.pull_request !== null;
}

/** "owner/name" from an issue's `repository_url` (`{api}/repos/{owner}/{name}`). */
export function repositoryOf(issue: GitHubIssue): string {
  const match = /\/repos\/([^/]+)\/([^/]+)\/?$/.exec(issue.repository_url);
  if (!match) throw new Error(`unexpected repository_url ${issue.repository_url}`);
  return `${decodeURIComponent(match[1]!)}/${decodeURIComponent(match[2]!)}`;
}

/** GitHub's owner and repository names are case-insensitive. */
export function sameRepository(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

export function issueFacts(issue: GitHubIssue, ref?: TicketRef): IssueFacts {
  return {
    ref: ref ?? { provider: "github", repository: repositoryOf(issue), number: issue.number },
    title: issue.title,
    body: issue.body ?? "",
    state: issue.state === "closed" ? "closed" : "open",
    stateReason: issue.state_reason ?? null,
    labels: (issue.labels ?? []).map((l) => (typeof l === "string" ? l : (l.name ?? ""))).filter((name) => name !== ""),
    url: issue.html_url,
    updatedAtMs: Date.parse(issue.updated_at),
  };
}

/** The fields of an issue the provider reads, all a conditional read keeps of it (a 304 answers them again). */
export function compactIssue(issue: GitHubIssue): GitHubIssue {
  return {
    number: issue.number,
    title: issue.title,
    body: issue.body ?? null,
    state: issue.state,
    state_reason: issue.state_reason ?? null,
    labels: (issue.labels ?? []).map((l) => ({ name: typeof l === "string" ? l : (l.name ?? "") })),
    html_url: issue.html_url,
    repository_url: issue.repository_url,
    updated_at: issue.updated_at,
    ...(isPullRequest(issue) ? { pull_request: true } : {}),
  };
}

/** The fields of an issue event the provider reads. */
export function compactEvent(event: GitHubIssueEvent): GitHubIssueEvent {
  const app = event.performed_via_github_app;
  return {
    id: event.id,
    event: event.event,
    created_at: event.created_at,
    actor: event.actor ? { login: event.actor.login, type: event.actor.type } : null,
    label: event.label ? { name: event.label.name } : null,
    performed_via_github_app: app ? { slug: app.slug ?? null, name: app.name ?? null } : null,
  };
}

/** The events that change what admission judges an issue by: its labels and its state. */
const READINESS_CHANGES = new Set(["labeled", "unlabeled", "closed", "reopened"]);

export function isReadinessChange(event: GitHubIssueEvent): boolean {
  return READINESS_CHANGES.has(event.event);
}

/** Whether an event is the addition of `label` (label names compare case-insensitively on GitHub). */
export function isLabeled(event: GitHubIssueEvent, label: string): boolean {
  return event.event === "labeled" && (event.label?.name ?? "").toLowerCase() === label.toLowerCase();
}

export function readyTransition(event: GitHubIssueEvent): ReadyTransition {
  const app = event.performed_via_github_app;
  const actor: ActorEvidence | null = event.actor
    ? { login: event.actor.login, type: event.actor.type, viaApp: app ? (app.slug ?? app.name ?? "unknown app") : null }
    : null;
  return { eventId: String(event.id), atMs: Date.parse(event.created_at), actor };
}

/** The page numbers a `Link` header names, by relation (`next`, `last`, …). */
export function linkPages(link: string | undefined | null): Record<string, number> {
  const pages: Record<string, number> = {};
  for (const part of (link ?? "").split(",")) {
    const match = /<([^>]+)>\s*;\s*rel="([^"]+)"/.exec(part);
    if (!match) continue;
    const page = Number(new URL(match[1]!).searchParams.get("page"));
    if (Number.isSafeInteger(page) && page > 0) pages[match[2]!] = page;
  }
  return pages;
}
