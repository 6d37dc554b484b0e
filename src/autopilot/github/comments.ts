// Writing to a GitHub issue for tracker deliveries (docs/protocol.md, "Tracker deliveries"): a
// comment posted once, a comment found again by its hidden marker, and labels moved. Each call
// goes through the project's client (client.ts bounds and rate-limits it).

import type { Config } from "../../config";
import type { CommentReceipt, TicketRef } from "../provider";
import { asList, call, describe, split } from "./calls";
import { toGitHubError, type GitHubClient } from "./client";
import { GitHubError } from "./errors";
import { linkPages } from "./issues";

interface GitHubComment {
  id: number;
  html_url: string;
  body?: string | null;
}

function asReceipt(data: unknown, what: string): CommentReceipt {
  const comment = data as GitHubComment | null;
  if (typeof comment !== "object" || comment === null || typeof comment.id !== "number") {
    throw new GitHubError("unavailable", `${what}: GitHub's answer was not a comment`);
  }
  return { id: String(comment.id), url: String(comment.html_url ?? "") };
}

/** One POST, never retried by the client: a lost answer is settled by findComment before the next try. */
export async function postComment(client: GitHubClient, ref: TicketRef, body: string): Promise<CommentReceipt> {
  const what = `commenting on ${describe(ref)}`;
  const response = await call(what, () =>
    client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
      ...split(ref.repository),
      issue_number: ref.number,
      body,
      request: { retries: 0 },
    }),
  );
  return asReceipt(response.data, what);
}

/** The issue's comment containing `marker`, reading at most GITHUB_PAGES_MAX pages. */
export async function findComment(client: GitHubClient, config: Config, ref: TicketRef, marker: string): Promise<CommentReceipt | null> {
  const what = `reading the comments of ${describe(ref)}`;
  for (let page = 1; page <= config.githubPagesMax; page++) {
    const response = await call(what, () =>
      client.request("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        ...split(ref.repository),
        issue_number: ref.number,
        per_page: Math.min(config.githubPageSize, 100),
        page,
      }),
    );
    const found = asList<GitHubComment>(response.data, what).find((c) => typeof c.body === "string" && c.body.includes(marker));
    if (found) return asReceipt(found, what);
    if (!linkPages(response.headers.link).next) return null;
  }
  throw new GitHubError("too_many_pages", `${what}: more than ${config.githubPagesMax} pages (GITHUB_PAGES_MAX)`);
}

/** Removes each label (one it does not carry is fine), then adds the new ones in one call. */
export async function moveLabels(client: GitHubClient, ref: TicketRef, labels: { remove: string[]; add: string[] }): Promise<void> {
  for (const name of labels.remove) {
    try {
      await client.request("DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", { ...split(ref.repository), issue_number: ref.number, name });
    } catch (err) {
      if ((err as { status?: number }).status === 404) continue;
      throw toGitHubError(err, `removing the label ${name} from ${describe(ref)}`);
    }
  }
  if (labels.add.length === 0) return;
  await call(`adding labels to ${describe(ref)}`, () =>
    client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/labels", { ...split(ref.repository), issue_number: ref.number, labels: labels.add }),
  );
}
