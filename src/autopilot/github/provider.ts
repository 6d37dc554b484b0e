// GitHub Issues as the tracker behind autopilot admission (../shared/spec/run-lifecycle.md,
// "Admission" and "Human readiness authorization"; issue 10's provider evidence): the issue, its
// blocking dependencies, who added the ready label, and the open issues carrying it, read through
// the project's GitHub App installation (client.ts bounds, retries and rate-limits every call).
// Every read here is conditional (conditional.ts): what did not change is a 304 GitHub does not count.

import type { Config } from "../../config";
import type { Blocker, IssueFacts, ReadyEvidence, ReadyIssuePage, TicketRef, TrackerProvider } from "../provider";
import { githubClient, type GitHubClient } from "./client";
import { asList, describe, split } from "./calls";
import { conditionalGet } from "./conditional";
import { findComment, moveLabels, postComment } from "./comments";
import { GitHubError } from "./errors";
import type { GitHubLedger } from "./ledger";
import {
  compactEvent,
  compactIssue,
  type GitHubIssue,
  type GitHubIssueEvent,
  isLabeled,
  isPullRequest,
  isReadinessChange,
  issueFacts,
  linkPages,
  readyTransition,
  repositoryOf,
  sameRepository,
} from "./issues";

/** What the provider needs of an autopilot project (AutopilotProject has these fields). */
export interface GitHubProjectSettings {
  id: string;
  repository: string;
  githubApiUrl: string;
  appId: string;
  installationId: string;
}

export function githubProvider(
  project: GitHubProjectSettings,
  secrets: { privateKey: string },
  config: Config,
  fetchImpl?: typeof fetch,
  ledger: GitHubLedger | null = null,
): TrackerProvider {
  // Made on first use, so a bad private key fails the call (a GitHubError) rather than the caller's setup.
  let made: GitHubClient | null = null;
  const client = async () =>
    (made ??= githubClient(
      {
        baseUrl: project.githubApiUrl,
        appId: project.appId,
        installationId: project.installationId,
        privateKey: secrets.privateKey,
        queueId: project.id,
        ledger,
      },
      config,
      fetchImpl,
    ));
  const reads = async (): Promise<Reads> => ({ client: await client(), ledger, config });
  return {
    getIssue: async (ref) => getIssue(await reads(), ref),
    listBlockers: async (ref) => listBlockers(await reads(), ref),
    lastReadyTransition: async (ref, label) => (await readyEvidence(await reads(), ref, label)).transition,
    readyEvidence: async (ref, label) => readyEvidence(await reads(), ref, label),
    listReadyIssues: async (label, cursor, limit, sinceMs) => listReadyIssues(await reads(), project.repository, label, { cursor, limit, sinceMs: sinceMs ?? null }),
    headroom: async () => (ledger ? ledger.headroom() : null),
    postComment: async (ref, body) => postComment(await client(), ref, body),
    findComment: async (ref, marker) => findComment(await client(), config, ref, marker),
    moveLabels: async (ref, labels) => moveLabels(await client(), ref, labels),
  };
}

/** What every read goes through: the client, the installation's ledger (conditional reads), the bounds. */
interface Reads {
  client: GitHubClient;
  ledger: GitHubLedger | null;
  config: Config;
}

function asIssue(data: unknown, what: string): GitHubIssue {
  const issue = data as GitHubIssue | null;
  if (typeof issue !== "object" || issue === null || typeof issue.number !== "number" || typeof issue.repository_url !== "string") {
    throw new GitHubError("unavailable", `${what}: GitHub's answer was not an issue`);
  }
  return issue;
}

/** The raw issue, or the status GitHub refused it with (403, 404, 410). */
async function readIssue(reads: Reads, ref: TicketRef): Promise<GitHubIssue | { refused: number }> {
  const what = `reading ${describe(ref)}`;
  try {
    const route = "GET /repos/{owner}/{repo}/issues/{issue_number}";
    const answer = await conditionalGet(reads.client, reads.ledger, what, route, { ...split(ref.repository), issue_number: ref.number }, (data) =>
      compactIssue(asIssue(data, what)),
    );
    return answer.data;
  } catch (err) {
    const failure = err as GitHubError;
    if ((failure.failure === "forbidden" || failure.status === 410) && failure.status !== null) return { refused: failure.status };
    throw failure;
  }
}

/** The issue now; null when it does not exist (or was deleted) or is a pull request. */
async function getIssue(reads: Reads, ref: TicketRef): Promise<IssueFacts | null> {
  const issue = await readIssue(reads, ref);
  if ("refused" in issue) {
    if (issue.refused === 403) throw new GitHubError("forbidden", `reading ${describe(ref)}: GitHub answered 403; the App installation cannot read it`, 403);
    return null;
  }
  return isPullRequest(issue) ? null : issueFacts(issue, ref);
}

/**
 * Every issue GitHub reports as blocking `ref` (`GET …/issues/{n}/dependencies/blocked_by`). A
 * blocker in another repository is read again through the installation: one it cannot read (403,
 * 404) has no facts and says why, so admission counts it as not done with that reason. Each page is
 * a conditional read: a list whose blockers did not change is a 304, which GitHub does not count.
 */
async function listBlockers(reads: Reads, ref: TicketRef): Promise<Blocker[]> {
  const { config } = reads;
  const what = `listing the blockers of ${describe(ref)}`;
  const listed: GitHubIssue[] = [];
  for (let page = 1; ; page++) {
    if (page > config.githubPagesMax) {
      throw new GitHubError("too_many_pages", `blockers of ${describe(ref)}: more than ${config.githubPagesMax} pages (GITHUB_PAGES_MAX)`);
    }
    const route = "GET /repos/{owner}/{repo}/issues/{issue_number}/dependencies/blocked_by";
    const params = { ...split(ref.repository), issue_number: ref.number, per_page: config.githubPageSize, page };
    const answer = await conditionalGet(reads.client, reads.ledger, what, route, params, (data) =>
      asList<unknown>(data, what).map((item) => compactIssue(asIssue(item, `a blocker of ${describe(ref)}`))),
    );
    listed.push(...answer.data);
    if (!linkPages(answer.link).next) break;
  }
  const blockers: Blocker[] = [];
  for (const item of listed) blockers.push(await blocker(reads, ref, item));
  return blockers;
}

async function blocker(reads: Reads, blocked: TicketRef, item: GitHubIssue): Promise<Blocker> {
  const ref: TicketRef = { provider: "github", repository: repositoryOf(item), number: item.number };
  if (sameRepository(ref.repository, blocked.repository)) return { ref, facts: issueFacts(item, ref), unreadable: null };
  const issue = await readIssue(reads, ref);
  if ("refused" in issue) {
    return { ref, facts: null, unreadable: `the GitHub App installation cannot read ${describe(ref)} (GitHub answered ${issue.refused})` };
  }
  return { ref, facts: issueFacts(issue, ref), unreadable: null };
}

/**
 * The latest `labeled` event for `label` in the issue's events (`GET …/issues/{n}/events`, oldest
 * first), read from the last page backwards, at most GITHUB_PAGES_MAX pages: when none of them
 * holds one the transition is null, an unknown transition, which admission refuses. With it, the
 * newest change of the issue's labels or state among the pages read (every such change after the
 * transition is on them). Pages are conditional reads; what is kept of them is those changes only.
 */
async function readyEvidence(reads: Reads, ref: TicketRef, label: string): Promise<ReadyEvidence> {
  const { config } = reads;
  const what = `reading the events of ${describe(ref)}`;
  const readPage = (page: number) =>
    conditionalGet(
      reads.client,
      reads.ledger,
      what,
      "GET /repos/{owner}/{repo}/issues/{issue_number}/events",
      { ...split(ref.repository), issue_number: ref.number, per_page: config.githubPageSize, page },
      (data) => asList<GitHubIssueEvent>(data, what).filter(isReadinessChange).map(compactEvent),
    );
  const first = await readPage(1);
  const lastPage = linkPages(first.link).last ?? 1;
  let lastChangeAtMs: number | null = null;
  for (let page = lastPage, read = 0; page >= 1 && read < config.githubPagesMax; page--, read++) {
    const events = page === 1 ? first.data : (await readPage(page)).data;
    for (const event of events) lastChangeAtMs = Math.max(lastChangeAtMs ?? 0, Date.parse(event.created_at));
    const latest = [...events].reverse().find((event) => isLabeled(event, label));
    if (latest) return { transition: readyTransition(latest), lastChangeAtMs };
  }
  return { transition: null, lastChangeAtMs };
}

/** The ready list's position: the page (of GITHUB_PAGE_SIZE issues) and the last issue number handed out. */
interface ReadyPosition {
  page: number;
  after: number;
}

function readyPosition(cursor: string | null): ReadyPosition {
  if (cursor === null) return { page: 1, after: 0 };
  const match = /^(\d+):(\d+)$/.exec(cursor);
  const page = Number(match?.[1]);
  if (!match || !Number.isSafeInteger(page) || page < 1) throw new GitHubError("unavailable", `ready issues: cursor ${cursor} is not a position in the list`);
  return { page, after: Number(match[2]) };
}

/**
 * Open issues of the repository carrying `label`, in issue-number order (GitHub's `sort=created`,
 * ascending), at most `limit` after the cursor; pull requests (which the issues endpoint lists too)
 * are left out. Pages always hold GITHUB_PAGE_SIZE issues, so a page's URL, and so its validator,
 * is the same from pass to pass; the cursor is the page and the last number handed out, so a
 * caller asking for fewer or more issues each time neither skips nor repeats one. When issues
 * before the page closed since it was read, the page before is read again (once a call): issues
 * that moved back onto it are not skipped.
 */
async function listReadyIssues(
  reads: Reads,
  repository: string,
  label: string,
  ask: { cursor: string | null; limit: number; sinceMs: number | null },
): Promise<ReadyIssuePage> {
  let { page, after } = readyPosition(ask.cursor);
  const issues: ReadyIssuePage["issues"] = [];
  let steppedBack = ask.cursor === null;
  for (let read = 0; read < reads.config.githubPagesMax + 1 && issues.length < ask.limit; read++) {
    const { items, next } = await readyPage(reads, repository, label, page, ask.sinceMs);
    if (!steppedBack && page > 1 && (items[0]?.number ?? Infinity) > after) {
      steppedBack = true;
      page -= 1;
      continue;
    }
    steppedBack = true;
    for (const item of items) {
      if (item.number <= after) continue;
      if (issues.length >= ask.limit) return { issues, cursor: `${page}:${after}` };
      after = item.number;
      if (item.pull_request !== true) issues.push({ ref: { provider: "github", repository, number: item.number }, updatedAtMs: Date.parse(item.updated_at) });
    }
    if (!next) return { issues, cursor: null };
    page += 1;
  }
  return { issues, cursor: `${page}:${after}` };
}

/** One page of the ready list, as a conditional read that keeps only each issue's number, update time and kind. */
async function readyPage(reads: Reads, repository: string, label: string, page: number, sinceMs: number | null) {
  const what = `listing the open issues labeled ${label} in ${repository}`;
  const params = {
    ...split(repository),
    labels: label,
    state: "open",
    sort: "created",
    direction: "asc",
    per_page: reads.config.githubPageSize,
    page,
    ...(sinceMs === null ? {} : { since: new Date(sinceMs).toISOString() }),
  };
  const answer = await conditionalGet(reads.client, reads.ledger, what, "GET /repos/{owner}/{repo}/issues", params, (data) =>
    asList<unknown>(data, what).map((item) => {
      const issue = asIssue(item, `an issue labeled ${label} in ${repository}`);
      return { number: issue.number, updated_at: issue.updated_at, ...(isPullRequest(issue) ? { pull_request: true } : {}) };
    }),
  );
  return { items: answer.data, next: linkPages(answer.link).next !== undefined };
}
