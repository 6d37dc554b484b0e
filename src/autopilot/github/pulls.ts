// GitHub as publication's code host (../shared/spec/run-lifecycle.md, "Completion and recovery"):
// an installation token narrowed to one repository and `contents: write` for the runner's push, a
// branch's head, and the pull request of a branch, looked up by `owner:branch` (GitHub ignores a
// bare branch name in `head` and lists every pull request) before one is ever created.

import type { Config } from "../../config";
import type { CreatedPullRequest, PublicationProvider, PullRequestFacts, PushToken } from "../provider";
import { split } from "./calls";
import { githubClient, toGitHubError, type GitHubClient } from "./client";
import { GitHubError } from "./errors";
import type { GitHubLedger } from "./ledger";
import type { GitHubProjectSettings } from "./provider";

interface GitHubPull {
  number: number;
  html_url: string;
  state: "open" | "closed";
  head: { ref: string; label?: string; repo?: { full_name?: string } | null };
}

export function githubPublisher(
  project: GitHubProjectSettings,
  secrets: { privateKey: string },
  config: Config,
  fetchImpl?: typeof fetch,
  ledger: GitHubLedger | null = null,
): PublicationProvider {
  let made: GitHubClient | null = null;
  const client = () =>
    (made ??= githubClient(
      { baseUrl: project.githubApiUrl, appId: project.appId, installationId: project.installationId, privateKey: secrets.privateKey, queueId: project.id, ledger },
      config,
      fetchImpl,
    ));
  return {
    issuePushToken: (repository) => issuePushToken(client(), project.installationId, repository),
    branchHead: (repository, branch) => branchHead(client(), repository, branch),
    findPullRequest: (repository, branch) => findPullRequest(client(), repository, branch),
    createPullRequest: (repository, pr) => createPullRequest(client(), repository, pr),
  };
}

/** `POST /app/installations/{id}/access_tokens` narrowed to this repository and `contents: write`. */
async function issuePushToken(client: GitHubClient, installationId: string, repository: string): Promise<PushToken> {
  const what = `issuing a push token for ${repository}`;
  try {
    const response = await client.request("POST /app/installations/{installation_id}/access_tokens", {
      installation_id: Number(installationId),
      repositories: [split(repository).repo],
      permissions: { contents: "write" },
    });
    const data = response.data as { token?: unknown; expires_at?: unknown };
    const expiresAtMs = Date.parse(String(data.expires_at));
    if (typeof data.token !== "string" || !Number.isFinite(expiresAtMs)) throw new GitHubError("unavailable", `${what}: GitHub's answer was not a token`);
    return { token: data.token, expiresAtMs };
  } catch (err) {
    throw toGitHubError(err, what);
  }
}

/** The branch's head commit (`GET …/git/ref/heads/{branch}`), null when GitHub has no such branch. */
async function branchHead(client: GitHubClient, repository: string, branch: string): Promise<string | null> {
  const what = `reading the head of ${repository}:${branch}`;
  try {
    const response = await client.request("GET /repos/{owner}/{repo}/git/ref/{ref}", { ...split(repository), ref: `heads/${branch}` });
    const sha = (response.data as { object?: { sha?: unknown } }).object?.sha;
    if (typeof sha !== "string") throw new GitHubError("unavailable", `${what}: GitHub's answer was not a ref`);
    return sha;
  } catch (err) {
    const failure = toGitHubError(err, what);
    if (failure.status === 404) return null;
    throw failure;
  }
}

function pullFacts(pull: GitHubPull): PullRequestFacts {
  return { number: pull.number, url: pull.html_url, branch: pull.head.ref, state: pull.state };
}

/** The pull request of `owner:branch`, open or closed; never asked by a bare branch name. */
async function findPullRequest(client: GitHubClient, repository: string, branch: string): Promise<PullRequestFacts | null> {
  const { owner, repo } = split(repository);
  const what = `looking up the pull request of ${repository}:${branch}`;
  try {
    const response = await client.request("GET /repos/{owner}/{repo}/pulls", { owner, repo, head: `${owner}:${branch}`, state: "all", per_page: 100 });
    if (!Array.isArray(response.data)) throw new GitHubError("unavailable", `${what}: GitHub's answer was not a list`);
    // Only a pull request whose head is this branch of this repository counts, whatever the filter returned.
    const match = (response.data as GitHubPull[]).find((p) => p.head?.ref === branch && (p.head.repo?.full_name ?? repository).toLowerCase() === repository.toLowerCase());
    return match ? pullFacts(match) : null;
  } catch (err) {
    throw toGitHubError(err, what);
  }
}

/** Opens the pull request; GitHub's 422 "A pull request already exists" answers `{ exists: true }`. */
async function createPullRequest(
  client: GitHubClient,
  repository: string,
  pr: { branch: string; base: string | null; title: string; body: string },
): Promise<CreatedPullRequest> {
  const what = `opening a pull request for ${repository}:${pr.branch}`;
  try {
    const base = pr.base ?? (await defaultBranch(client, repository));
    const response = await client.request("POST /repos/{owner}/{repo}/pulls", { ...split(repository), head: pr.branch, base, title: pr.title, body: pr.body });
    return { created: pullFacts(response.data as GitHubPull) };
  } catch (err) {
    if (alreadyExists(err)) return { exists: true };
    throw toGitHubError(err, what);
  }
}

async function defaultBranch(client: GitHubClient, repository: string): Promise<string> {
  const response = await client.request("GET /repos/{owner}/{repo}", split(repository));
  const name = (response.data as { default_branch?: unknown }).default_branch;
  if (typeof name !== "string" || name === "") throw new GitHubError("unavailable", `reading ${repository}: GitHub's answer named no default branch`);
  return name;
}

function alreadyExists(err: unknown): boolean {
  const e = err as { status?: number; message?: string; response?: { data?: { errors?: { message?: string }[] } } };
  if (e?.status !== 422) return false;
  const messages = [e.message ?? "", ...(e.response?.data?.errors ?? []).map((x) => x.message ?? "")];
  return messages.some((m) => /already exists/i.test(m));
}
