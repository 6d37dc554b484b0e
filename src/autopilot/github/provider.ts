// GitHub Issues as the tracker behind autopilot admission (../shared/spec/run-lifecycle.md,
// "Admission" and "Human readiness authorization"; issue 10's provider evidence): the issue, its
// blocking dependencies, who added the ready label, and the open issues carrying it, read through
// the project's GitHub App installation (client.ts bounds, retries and rate-limits every call).

import type { Config } from "../../config";
import type { Blocker, IssueFacts, ReadyIssuePage, ReadyTransition, TicketRef, TrackerProvider } from "../provider";
import { githubClient, toGitHubError, type GitHubClient } from "./client";
import { asList, call, describe, split } from "./calls";
import { findComment, moveLabels, postComment } from "./comments";
import { GitHubError } from "./errors";
import {
  type GitHubIssue,
  type GitHubIssueEvent,
  isLabeled,
  isPullRequest,
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
      },
      config,
      fetchImpl,
    ));
  return {
    getIssue: async (ref) => getIssue(await client(), ref),
    listBlockers: async (ref) => listBlockers(await client(), config, ref),
    lastReadyTransition: async (ref, label) => lastReadyTransition(await client(), config, ref, label),
    listReadyIssues: async (label, cursor, pageSize) => listReadyIssues(await client(), project.repository, label, cursor, pageSize),
    postComment: async (ref, body) => postComment(await client(), ref, body),
    findComment: async (ref, marker) => findComment(await client(), config, ref, marker),
    moveLabels: async (ref, labels) => moveLabels(await client(), ref, labels),
  };
}

function asIssue(data: unknown, what: string): GitHubIssue {
  const issue = data as GitHubIssue | null;
  if (typeof issue !== "object" || issue === null || typeof issue.number !== "number" || typeof issue.repository_url !== "string") {
    throw new GitHubError("unavailable", `${what}: GitHub's answer was not an issue`);
  }
  return issue;
}

/** The raw issue, or the status GitHub refused it with (403, 404, 410). */
async function readIssue(client: GitHubClient, ref: TicketRef): Promise<GitHubIssue | { refused: number }> {
  const what = `reading ${describe(ref)}`;
  let data: unknown;
  try {
    const response = await client.request("GET /repos/{owner}/{repo}/issues/{issue_number}", {
      ...split(ref.repository),
      issue_number: ref.number,
    });
    data = response.data;
  } catch (err) {
    const failure = toGitHubError(err, what);
    if ((failure.failure === "forbidden" || failure.status === 410) && failure.status !== null) return { refused: failure.status };
    throw failure;
  }
  return asIssue(data, what);
}

/** The issue now; null when it does not exist (or was deleted) or is a pull request. */
async function getIssue(client: GitHubClient, ref: TicketRef): Promise<IssueFacts | null> {
  const issue = await readIssue(client, ref);
  if ("refused" in issue) {
    if (issue.refused === 403) throw new GitHubError("forbidden", `reading ${describe(ref)}: GitHub answered 403; the App installation cannot read it`, 403);
    return null;
  }
  return isPullRequest(issue) ? null : issueFacts(issue, ref);
}

/**
 * Every issue GitHub reports as blocking `ref` (`GET …/issues/{n}/dependencies/blocked_by`). A
 * blocker in another repository is read again through the installation: one it cannot read (403,
 * 404) has no facts and says why, so admission counts it as not done with that reason.
 */
async function listBlockers(client: GitHubClient, config: Config, ref: TicketRef): Promise<Blocker[]> {
  const listed: GitHubIssue[] = [];
  for (let page = 1; ; page++) {
    if (page > config.githubPagesMax) {
      throw new GitHubError("too_many_pages", `blockers of ${describe(ref)}: more than ${config.githubPagesMax} pages (GITHUB_PAGES_MAX)`);
    }
    const response = await call(`listing the blockers of ${describe(ref)}`, () =>
      client.request("GET /repos/{owner}/{repo}/issues/{issue_number}/dependencies/blocked_by", {
        ...split(ref.repository),
        issue_number: ref.number,
        per_page: config.githubPageSize,
        page,
      }),
    );
    listed.push(...asList<unknown>(response.data, `listing the blockers of ${describe(ref)}`).map((item) => asIssue(item, `a blocker of ${describe(ref)}`)));
    if (!linkPages(response.headers.link).next) break;
  }
  const blockers: Blocker[] = [];
  for (const item of listed) blockers.push(await blocker(client, ref, item));
  return blockers;
}

async function blocker(client: GitHubClient, blocked: TicketRef, item: GitHubIssue): Promise<Blocker> {
  const ref: TicketRef = { provider: "github", repository: repositoryOf(item), number: item.number };
  if (sameRepository(ref.repository, blocked.repository)) return { ref, facts: issueFacts(item, ref), unreadable: null };
  const issue = await readIssue(client, ref);
  if ("refused" in issue) {
    return { ref, facts: null, unreadable: `the GitHub App installation cannot read ${describe(ref)} (GitHub answered ${issue.refused})` };
  }
  return { ref, facts: issueFacts(issue, ref), unreadable: null };
}

/**
 * The latest `labeled` event for `label` in the issue's events (`GET …/issues/{n}/events`, oldest
 * first), read from the last page backwards, at most GITHUB_PAGES_MAX pages: when none of them
 * holds one the answer is null, an unknown transition, which admission refuses.
 */
async function lastReadyTransition(client: GitHubClient, config: Config, ref: TicketRef, label: string): Promise<ReadyTransition | null> {
  const what = `reading the events of ${describe(ref)}`;
  const readPage = (page: number) =>
    call(what, () =>
      client.request("GET /repos/{owner}/{repo}/issues/{issue_number}/events", {
        ...split(ref.repository),
        issue_number: ref.number,
        per_page: config.githubPageSize,
        page,
      }),
    );
  const first = await readPage(1);
  const lastPage = linkPages(first.headers.link).last ?? 1;
  for (let page = lastPage, read = 0; page >= 1 && read < config.githubPagesMax; page--, read++) {
    const events = asList<GitHubIssueEvent>(page === 1 ? first.data : (await readPage(page)).data, what);
    const latest = [...events].reverse().find((event) => isLabeled(event, label));
    if (latest) return readyTransition(latest);
  }
  return null;
}

/** GitHub answers at most 100 items a page; its next-page links assume the page size asked for. */
const GITHUB_PER_PAGE_MAX = 100;

/**
 * Open issues of the repository carrying `label`, oldest first, one page at a time; pull requests
 * (which the issues endpoint lists too) are left out, so a page may hold fewer than `pageSize`.
 * The cursor is GitHub's next page number, for the same page size.
 */
async function listReadyIssues(
  client: GitHubClient,
  repository: string,
  label: string,
  cursor: string | null,
  pageSize: number,
): Promise<ReadyIssuePage> {
  const page = cursor === null ? 1 : Number(cursor);
  if (!Number.isSafeInteger(page) || page < 1) throw new GitHubError("unavailable", `ready issues: cursor ${cursor} is not a page number`);
  const response = await call(`listing the open issues labeled ${label} in ${repository}`, () =>
    client.request("GET /repos/{owner}/{repo}/issues", {
      ...split(repository),
      labels: label,
      state: "open",
      sort: "created",
      direction: "asc",
      per_page: Math.min(Math.max(1, pageSize), GITHUB_PER_PAGE_MAX),
      page,
    }),
  );
  const items = asList<unknown>(response.data, `listing the open issues labeled ${label} in ${repository}`).map((item) =>
    asIssue(item, `an issue labeled ${label} in ${repository}`),
  );
  const issues = items
    .filter((item) => !isPullRequest(item))
    .map((item) => issueFacts(item, { provider: "github", repository, number: item.number }));
  const next = linkPages(response.headers.link).next;
  return { issues, cursor: next ? String(next) : null };
}
