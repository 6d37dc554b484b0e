// Docket's half of a publication (../shared/spec/run-lifecycle.md, "Completion and recovery"): once
// the runner reported its push, verify the branch head, find the branch's pull request, create it
// only when none exists (GitHub's "already exists" means: look it up again), and only then complete
// the run with the PR stored. Each step is recorded through `record` before the next side effect.

import type { Config } from "../config";
import type { PublicationProvider, PullRequestFacts } from "./provider";
import type { RunCommand, RunRecord } from "../run/types";

type StepCommand = Extract<RunCommand, { type: "publish_try" | "published" | "publish_failed" }>;

/** Applies one command to the run; false when the run refused it (it moved on meanwhile). */
export type Record = (command: StepCommand) => boolean;

export async function prStep(run: RunRecord, host: PublicationProvider, repository: string, config: Pick<Config, "publicationRetryMs">, record: Record): Promise<void> {
  const p = run.publication;
  if (!p || p.headSha === null || p.pr !== null) return;
  const retryAt = () => Date.now() + config.publicationRetryMs;
  try {
    const head = await host.branchHead(repository, p.branch);
    if (head === null) throw new Error(`the pushed branch ${p.branch} is not on ${repository} (yet)`);
    if (head !== p.headSha) {
      // Someone moved the branch: what would be published is no longer what was verified.
      record({ type: "publish_failed", error: `publish_failed: ${p.branch} is at ${head}, not the pushed and verified ${p.headSha}` });
      return;
    }
    let pr: PullRequestFacts | null = await host.findPullRequest(repository, p.branch);
    if (!pr) {
      if (!record({ type: "publish_try", error: null, retryAtMs: retryAt() })) return;
      const created = await host.createPullRequest(repository, { branch: p.branch, base: null, title: prTitle(run), body: prBody(run) });
      pr = "created" in created ? created.created : await host.findPullRequest(repository, p.branch);
      if (!pr) throw new Error(`the host said a pull request for ${p.branch} exists, but none was found by its branch`);
    }
    record({ type: "published", pr: { number: pr.number, url: pr.url } });
  } catch (err) {
    record({ type: "publish_try", error: err instanceof Error ? err.message : String(err), retryAtMs: retryAt() });
  }
}

function prTitle(run: RunRecord): string {
  const first = run.brief.split("\n")[0]?.trim() ?? "";
  return (first || `Docket run ${run.id}`).slice(0, 200);
}

function prBody(run: RunRecord): string {
  const issue = run.metadata.issue_url ? ` for ${run.metadata.issue_url}` : "";
  return `Published by Docket run ${run.id}${issue}.`;
}
