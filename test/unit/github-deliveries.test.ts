// The GitHub provider's writes for tracker deliveries (src/autopilot/github/comments.ts) against the
// fake GitHub on loopback (test/fake-github/server.mjs): comments posted once, found again by their
// marker across pages, labels moved; the production code over real HTTP, as the App installation.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULTS, type Config } from "../../src/config";
import { GitHubError } from "../../src/autopilot/github/errors";
import { githubProvider } from "../../src/autopilot/github/provider";
import type { TicketRef } from "../../src/autopilot/provider";
// @ts-expect-error: a plain ES module without types
import { makeAppKeyPair, startFakeGitHub } from "../fake-github/server.mjs";

const REPO = "acme/widgets";
const ref = (number: number): TicketRef => ({ provider: "github", repository: REPO, number });
// The fake GitHub listens on loopback, which a deployment allows only with OUTBOUND_ALLOW_LOOPBACK.
const config: Config = { ...DEFAULTS, outboundAllowLoopback: true, githubRequestTimeoutMs: 2_000, githubRetries: 2, githubRetryBaseMs: 20, githubPageSize: 2, githubPagesMax: 3 };
const keys = makeAppKeyPair();
let gh: Awaited<ReturnType<typeof startFakeGitHub>>;

function provider() {
  return githubProvider({ id: "apj_deliveries", repository: REPO, githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId }, { privateKey: keys.privateKey }, config);
}

beforeAll(async () => {
  gh = await startFakeGitHub({ appId: "4242", installationId: "777", publicKey: keys.publicKey });
});
afterAll(async () => {
  await gh.close();
});

describe("comments", () => {
  it("posts a comment as the App and answers its id and URL", async () => {
    gh.state.addIssue(REPO, 1);
    const receipt = await provider().postComment(ref(1), "hello <!-- docket:run=run_1:kind=blocker_comment -->");
    const [comment] = gh.state.comments(REPO, 1);
    expect(receipt).toEqual({ id: String(comment.id), url: comment.html_url });
    expect(comment).toMatchObject({ login: "docket[bot]", body: "hello <!-- docket:run=run_1:kind=blocker_comment -->" });
  });

  it("finds the comment carrying a marker on a later page, and null when no comment carries it", async () => {
    gh.state.addIssue(REPO, 2);
    for (const body of ["first", "second", "third", "the one <!-- docket:run=run_2:kind=pr_comment -->"]) gh.state.addComment(REPO, 2, body);
    const found = await provider().findComment(ref(2), "<!-- docket:run=run_2:kind=pr_comment -->");
    const stored = gh.state.comments(REPO, 2)[3];
    expect(found).toEqual({ id: String(stored.id), url: stored.html_url });
    expect(await provider().findComment(ref(2), "<!-- docket:run=run_2:kind=blocker_comment -->")).toBeNull();
  });

  it("reads at most GITHUB_PAGES_MAX pages looking for a marker", async () => {
    gh.state.addIssue(REPO, 3);
    for (let i = 0; i < 8; i++) gh.state.addComment(REPO, 3, `comment ${i}`);
    const err = await provider().findComment(ref(3), "<!-- nowhere -->").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitHubError);
    expect((err as GitHubError).failure).toBe("too_many_pages");
  });

  it("a post whose answer is lost is not retried by the client: the delivery's next try looks for it first", async () => {
    gh.state.addIssue(REPO, 4);
    gh.state.loseAnswer({ path: `/repos/${REPO}/issues/4/comments`, method: "POST" });
    const err = await provider().postComment(ref(4), "once <!-- m -->").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitHubError);
    expect(gh.state.comments(REPO, 4)).toHaveLength(1);
    expect(await provider().findComment(ref(4), "<!-- m -->")).toEqual({ id: String(gh.state.comments(REPO, 4)[0].id), url: gh.state.comments(REPO, 4)[0].html_url });
  });
});

describe("moveLabels", () => {
  it("removes the ready label and adds the review label; a label already gone is no failure", async () => {
    gh.state.addIssue(REPO, 5, { labels: ["ready", "bug"] });
    await provider().moveLabels(ref(5), { remove: ["ready"], add: ["in review"] });
    const issue = await provider().getIssue(ref(5));
    expect(issue?.labels.sort()).toEqual(["bug", "in review"]);
    await provider().moveLabels(ref(5), { remove: ["ready"], add: ["in review"] });
    expect((await provider().getIssue(ref(5)))?.labels.sort()).toEqual(["bug", "in review"]);
  });

  it("a failure GitHub keeps answering is a GitHubError naming what was done", async () => {
    gh.state.addIssue(REPO, 6, { labels: ["ready"] });
    gh.state.fail({ path: `/repos/${REPO}/issues/6/labels`, method: "POST", status: 502, times: 5 });
    const err = await provider().moveLabels(ref(6), { remove: [], add: ["in review"] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitHubError);
    expect((err as GitHubError).message).toContain("adding labels to acme/widgets#6");
  });
});
