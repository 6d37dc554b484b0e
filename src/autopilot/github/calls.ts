// What every read and write of the GitHub tracker shares (provider.ts reads issues, comments.ts
// writes to them): a repository as owner and name, a ticket named in messages, GitHub's answer
// checked to be a list, and a call whose failure names what was being done.

import type { TicketRef } from "../provider";
import { toGitHubError } from "./client";
import { GitHubError } from "./errors";

export function split(repository: string): { owner: string; repo: string } {
  const [owner, repo] = repository.split("/");
  if (!owner || !repo) throw new GitHubError("unavailable", `repository ${repository} is not owner/name`);
  return { owner, repo };
}

export function describe(ref: TicketRef): string {
  return `${ref.repository}#${ref.number}`;
}

/** GitHub's answer as the list it must be; anything else (a proxy's page, a truncated body) is a failure. */
export function asList<T>(data: unknown, what: string): T[] {
  if (!Array.isArray(data)) throw new GitHubError("unavailable", `${what}: GitHub's answer was not a list`);
  return data as T[];
}

/** Runs one Octokit call, turning its failure into a GitHubError that names what was being read. */
export async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toGitHubError(err, what);
  }
}
