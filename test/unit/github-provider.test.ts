// The GitHub provider (src/autopilot/github/) against a fake GitHub on loopback
// (test/fake-github/server.mjs): the production code, over real HTTP, as the App installation.

import { createPrivateKey } from "node:crypto";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { DEFAULTS, loadConfig, type Config } from "../../src/config";
import { GitHubError } from "../../src/autopilot/github/errors";
import { toPkcs8Pem } from "../../src/autopilot/github/private-key";
import { githubProvider } from "../../src/autopilot/github/provider";
import type { Headroom, TicketRef } from "../../src/autopilot/provider";
import type { CachedAnswer, GitHubLedger } from "../../src/autopilot/github/ledger";
// @ts-expect-error: a plain ES module without types
import { makeAppKeyPair, startFakeGitHub } from "../fake-github/server.mjs";

const REPO = "acme/widgets";
const ref = (number: number, repository = REPO): TicketRef => ({ provider: "github", repository, number });

// Short bounds so failures finish quickly; each test states the bound it relies on. The fake
// GitHub listens on loopback, which a deployment allows only with OUTBOUND_ALLOW_LOOPBACK.
const config: Config = {
  ...DEFAULTS,
  outboundAllowLoopback: true,
  githubRequestTimeoutMs: 300,
  githubRetries: 2,
  githubRetryBaseMs: 20,
  githubRateLimitWaitMaxMs: 3_000,
  githubPageSize: 100,
  githubPagesMax: 10,
};

const keys = makeAppKeyPair();
let gh: Awaited<ReturnType<typeof startFakeGitHub>>;
let projectSeq = 0;

function provider(overrides: Partial<Config> = {}, privateKey: string = keys.privateKey) {
  const project = { id: `apj_test${++projectSeq}`, repository: REPO, githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId };
  return githubProvider(project, { privateKey }, { ...config, ...overrides });
}

async function failure(promise: Promise<unknown>): Promise<GitHubError> {
  const err = await promise.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(GitHubError);
  return err as GitHubError;
}

const readsOf = (path: string) => gh.reads().filter((r: { path: string }) => r.path === path);

beforeAll(async () => {
  gh = await startFakeGitHub({ appId: "4242", installationId: "777", publicKey: keys.publicKey });
});
afterAll(async () => {
  await gh.close();
});
beforeEach(() => {
  gh.requests.length = 0;
});

describe("getIssue", () => {
  it("reports the issue's facts as GitHub has them", async () => {
    const model = gh.state.addIssue(REPO, 1, { title: "Add the widget", body: "## Agent Brief\nDo it.", labels: ["ready", "Area: UI"] });
    gh.state.addIssue(REPO, 2, { title: "Done one" });
    gh.state.updateIssue(REPO, 2, { state: "closed", stateReason: "completed" });
    const facts = await provider().getIssue(ref(1));
    expect(facts).toEqual({
      ref: ref(1),
      title: "Add the widget",
      body: "## Agent Brief\nDo it.",
      state: "open",
      stateReason: null,
      labels: ["ready", "Area: UI"],
      url: `https://github.com/${REPO}/issues/1`,
      updatedAtMs: model.updatedAtMs,
    });
    const closed = await provider().getIssue(ref(2));
    expect(closed).toMatchObject({ state: "closed", stateReason: "completed" });
  });

  it("answers null for a pull request and for an issue that does not exist", async () => {
    gh.state.addIssue(REPO, 3, { pullRequest: true, labels: ["ready"] });
    const p = provider();
    expect(await p.getIssue(ref(3))).toBeNull();
    expect(await p.getIssue(ref(404))).toBeNull();
  });

  it("fails clearly, never with made-up facts, when the answer is not an issue", async () => {
    gh.state.addIssue(REPO, 4);
    gh.state.fail({ path: `/repos/${REPO}/issues/4`, status: 200, message: "a proxy's answer" });
    const err = await failure(provider().getIssue(ref(4)));
    expect(err.failure).toBe("unavailable");
    expect(err.message).toBe(`reading ${REPO}#4: GitHub's answer was not an issue`);
  });

  it("fails clearly when the installation cannot read the repository", async () => {
    gh.state.addIssue("acme/private", 1);
    gh.state.fail({ path: "/repos/acme/private/issues/1", status: 403, message: "Resource not accessible by integration" });
    const err = await failure(provider().getIssue(ref(1, "acme/private")));
    expect(err.failure).toBe("forbidden");
    expect(err.message).toContain("acme/private#1");
  });
});

describe("listBlockers", () => {
  it("reports each blocker's facts, and a blocker the installation cannot read as unreadable with the reason", async () => {
    gh.state.addIssue(REPO, 10, { labels: ["ready"] });
    gh.state.addIssue(REPO, 11, { state: "closed", stateReason: "completed" });
    gh.state.addIssue(REPO, 12, { labels: ["in progress"] });
    gh.state.addIssue("acme/shared", 5, { state: "closed", stateReason: "not_planned" });
    gh.state.addIssue("other/secret", 9);
    gh.state.hideRepository("other/secret");
    gh.state.setBlockedBy(REPO, 10, [[REPO, 11], [REPO, 12], ["acme/shared", 5], ["other/secret", 9]]);

    const blockers = await provider().listBlockers(ref(10));
    expect(blockers.map((b) => [b.ref.repository, b.ref.number, b.facts?.state ?? null, b.facts?.stateReason ?? null])).toEqual([
      [REPO, 11, "closed", "completed"],
      [REPO, 12, "open", null],
      ["acme/shared", 5, "closed", "not_planned"],
      ["other/secret", 9, null, null],
    ]);
    expect(blockers[1]!.facts!.labels).toEqual(["in progress"]);
    expect(blockers.slice(0, 3).every((b) => b.unreadable === null)).toBe(true);
    expect(blockers[3]!.unreadable).toBe("the GitHub App installation cannot read other/secret#9 (GitHub answered 404)");
    expect(readsOf(`/repos/${REPO}/issues/10/dependencies/blocked_by`)).toHaveLength(1);
  });

  it("reads every page of blockers, and no more than GITHUB_PAGES_MAX", async () => {
    gh.state.addIssue(REPO, 20);
    const numbers = [21, 22, 23, 24, 25];
    for (const n of numbers) gh.state.addIssue(REPO, n);
    gh.state.setBlockedBy(REPO, 20, numbers.map((n) => [REPO, n]));
    const blockers = await provider({ githubPageSize: 2 }).listBlockers(ref(20));
    expect(blockers.map((b) => b.ref.number)).toEqual(numbers);
    expect(readsOf(`/repos/${REPO}/issues/20/dependencies/blocked_by`).map((r: { query: { page: string } }) => r.query.page)).toEqual(["1", "2", "3"]);

    const err = await failure(provider({ githubPageSize: 2, githubPagesMax: 2 }).listBlockers(ref(20)));
    expect(err.failure).toBe("too_many_pages");
  });

  it("answers no blockers for an issue GitHub lists none for", async () => {
    gh.state.addIssue(REPO, 30);
    expect(await provider().listBlockers(ref(30))).toEqual([]);
  });
});

describe("lastReadyTransition", () => {
  it("reports the latest addition of the label: its event, time, actor and the app it came through", async () => {
    gh.state.addIssue(REPO, 40);
    gh.state.label(REPO, 40, "ready", { login: "alice", type: "User" }, { atMs: Date.parse("2026-01-01T10:00:00Z") });
    gh.state.unlabel(REPO, 40, "ready", { login: "alice", type: "User" });
    const id = gh.state.label(REPO, 40, "Ready", { login: "bob", type: "User" }, { viaApp: "some-integration", atMs: Date.parse("2026-01-02T10:00:00Z") });
    gh.state.label(REPO, 40, "bug", { login: "carol", type: "User" });

    expect(await provider().lastReadyTransition(ref(40), "ready")).toEqual({
      eventId: String(id),
      atMs: Date.parse("2026-01-02T10:00:00Z"),
      actor: { login: "bob", type: "User", viaApp: "some-integration" },
    });
  });

  it("reports a bot as the bot it is, and a missing actor as unknown", async () => {
    gh.state.addIssue(REPO, 41);
    gh.state.label(REPO, 41, "ready", { login: "renovate[bot]", type: "Bot" });
    expect((await provider().lastReadyTransition(ref(41), "ready"))!.actor).toEqual({ login: "renovate[bot]", type: "Bot", viaApp: null });
    gh.state.addIssue(REPO, 42);
    gh.state.addEvent(REPO, 42, { event: "labeled", label: "ready", actor: null });
    expect((await provider().lastReadyTransition(ref(42), "ready"))!.actor).toBeNull();
  });

  it("reads the events from the last page backwards, within GITHUB_PAGES_MAX pages", async () => {
    gh.state.addIssue(REPO, 43);
    const id = gh.state.label(REPO, 43, "ready", { login: "alice", type: "User" });
    for (let i = 0; i < 6; i++) gh.state.addEvent(REPO, 43, { event: "commented", actor: { login: "dave", type: "User" } });
    // 7 events, 2 a page: the label is on page 1, found after pages 4, 3 and 2.
    const p = provider({ githubPageSize: 2 });
    expect((await p.lastReadyTransition(ref(43), "ready"))!.eventId).toBe(String(id));
    expect(readsOf(`/repos/${REPO}/issues/43/events`).map((r: { query: { page: string } }) => r.query.page)).toEqual(["1", "4", "3", "2"]);

    gh.requests.length = 0;
    expect(await provider({ githubPageSize: 2, githubPagesMax: 2 }).lastReadyTransition(ref(43), "ready")).toBeNull();
    expect(readsOf(`/repos/${REPO}/issues/43/events`).map((r: { query: { page: string } }) => r.query.page)).toEqual(["1", "4", "3"]);
  });

  it("answers null when the label was never added", async () => {
    gh.state.addIssue(REPO, 44, { labels: ["ready"] });
    gh.state.label(REPO, 44, "bug");
    expect(await provider().lastReadyTransition(ref(44), "ready")).toBeNull();
  });
});

/** The ledger kept in memory (production keeps it in D1, src/autopilot/github/usage-store.ts): what the provider kept and was told. */
function memoryLedger() {
  const entries = new Map<string, CachedAnswer>();
  const observed: { counted: boolean; headroom: Headroom | null }[] = [];
  const ledger: GitHubLedger = {
    cached: async (url) => entries.get(url) ?? null,
    remember: async (url, answer) => void entries.set(url, answer),
    revalidated: async () => {},
    observe: async (answer) => void observed.push(answer),
    headroom: async () => observed.findLast((o) => o.headroom)?.headroom ?? null,
  };
  return { ledger, entries, observed };
}

function ledgered(repository: string, ledger: GitHubLedger) {
  const project = { id: `apj_ledger${++projectSeq}`, repository, githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId };
  return githubProvider(project, { privateKey: keys.privateKey }, config, undefined, ledger);
}

describe("conditional reads", () => {
  it("a read repeated on an unchanged issue sends its ETag back, is answered 304 and reuses the kept facts: GitHub counts nothing", async () => {
    const repo = "acme/conditional";
    gh.state.addIssue(repo, 1, { title: "Kept", body: "## Agent Brief\ngoal: x", labels: ["ready"] });
    const { ledger } = memoryLedger();
    const first = await ledgered(repo, ledger).getIssue(ref(1, repo));
    const counted = gh.counted();
    const again = await ledgered(repo, ledger).getIssue(ref(1, repo));
    expect(again).toEqual(first);
    expect(gh.counted()).toBe(counted);
    const read = gh.reads().filter((r: { path: string }) => r.path === `/repos/${repo}/issues/1`);
    expect(read.map((r: { status: number }) => r.status)).toEqual([200, 304]);
    // A change is read (and counted) again.
    gh.state.updateIssue(repo, 1, { title: "Changed" });
    expect((await ledgered(repo, ledger).getIssue(ref(1, repo)))?.title).toBe("Changed");
    expect(gh.counted()).toBe(counted + 1);
  });

  it("an issue waiting, whose issue, blockers and events did not change, costs nothing that counts when examined again", async () => {
    const repo = "acme/waiting";
    gh.state.addIssue(repo, 1, { labels: [] });
    gh.state.addIssue(repo, 2, { labels: [] });
    gh.state.setBlockedBy(repo, 2, [[repo, 1]]);
    gh.state.label(repo, 2, "ready", { login: "octocat", type: "User" });
    const { ledger, entries } = memoryLedger();
    const examine = async () => {
      const p = ledgered(repo, ledger);
      return [await p.getIssue(ref(2, repo)), await p.listBlockers(ref(2, repo)), await p.lastReadyTransition(ref(2, repo), "ready"), await p.listReadyIssues("ready", null, 50)];
    };
    const first = await examine();
    const counted = gh.counted();
    expect(await examine()).toEqual(first);
    expect(gh.counted()).toBe(counted);
    // What is kept is what the provider reads, not GitHub's whole answer.
    expect(JSON.stringify([...entries.values()])).not.toContain("avatar_url");
    // A blocker closing changes the blockers' answer: it is read again, and counted.
    gh.state.updateIssue(repo, 1, { state: "closed", stateReason: "completed" });
    const [, blockers] = await examine();
    expect((blockers as { facts: { state: string } }[])[0]?.facts.state).toBe("closed");
    expect(gh.counted()).toBeGreaterThan(counted);
  });

  it("records the installation's rate limit from every answer, and whether GitHub counted it", async () => {
    const repo = "acme/limits";
    gh.state.addIssue(repo, 1);
    gh.state.setRateLimit({ limit: 5_000, remaining: 1_234, resetInS: 600 });
    const { ledger, observed } = memoryLedger();
    await ledgered(repo, ledger).getIssue(ref(1, repo));
    await ledgered(repo, ledger).getIssue(ref(1, repo));
    expect(observed.map((o) => o.counted)).toEqual([true, false]);
    expect(await ledger.headroom()).toEqual({ remaining: 1_233, limit: 5_000, resetAtMs: expect.any(Number) });
    expect((await ledger.headroom())!.resetAtMs).toBeGreaterThan(Date.now() + 590_000);
    gh.state.setRateLimit({ limit: 5_000, remaining: 5_000 });
  });
});

describe("listReadyIssues", () => {
  it("lists the open issues carrying the label in number order, a limit at a time, leaving pull requests out", async () => {
    const repo = "acme/listing";
    const at = Date.parse("2026-02-01T00:00:00Z");
    for (const n of [1, 2, 3, 4, 5]) gh.state.addIssue(repo, n, { labels: ["ready"], createdAtMs: at + n });
    gh.state.addIssue(repo, 6, { labels: ["ready"], pullRequest: true, createdAtMs: at + 6 });
    gh.state.addIssue(repo, 7, { labels: ["ready"], state: "closed", stateReason: "completed", createdAtMs: at + 7 });
    gh.state.addIssue(repo, 8, { labels: ["bug"], createdAtMs: at + 8 });
    gh.state.addIssue(repo, 9, { labels: ["ready", "bug"], createdAtMs: at + 9 });
    const p = githubProvider(
      { id: "apj_listing", repository: repo, githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId },
      { privateKey: keys.privateKey },
      config,
    );
    const pages: number[][] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 10; i++) {
      const page = await p.listReadyIssues("ready", cursor, 2);
      pages.push(page.issues.map((issue) => issue.ref.number));
      expect(page.issues.every((issue) => issue.ref.repository === repo)).toBe(true);
      cursor = page.cursor;
      if (cursor === null) break;
    }
    expect(pages).toEqual([[1, 2], [3, 4], [5, 9]]);
    const listed = gh.reads().filter((r: { path: string }) => r.path === `/repos/${repo}/issues`);
    expect(listed.map((r: { query: Record<string, string> }) => [r.query.labels, r.query.state, r.query.sort, r.query.direction])).toEqual(
      Array(3).fill(["ready", "open", "created", "asc"]),
    );
  });

  it("two projects sharing an installation, 120 ready issues each, asked for varying numbers a tick: every issue is listed once per pass, none skipped", async () => {
    const repos = ["acme/shared-one", "acme/shared-two"];
    const at = Date.parse("2026-02-02T00:00:00Z");
    for (const repo of repos) for (let n = 1; n <= 120; n++) gh.state.addIssue(repo, n, { labels: ["ready"], createdAtMs: at + n });
    const providers = repos.map((repo, i) =>
      githubProvider({ id: `apj_shared${i}`, repository: repo, githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId }, { privateKey: keys.privateKey }, { ...config, githubPageSize: 30 }),
    );
    // A tick's 50 shared between the two, as one project's use leaves the other the rest.
    const listed: number[][] = [[], []];
    const cursors: (string | null)[] = [null, null];
    const done = [false, false];
    for (let tick = 0; tick < 40 && !done.every(Boolean); tick++) {
      let left = 50;
      for (const i of [0, 1]) {
        if (done[i] || left === 0) continue;
        const asked = Math.min(left, [50, 7, 33, 12, 1][(tick + i) % 5]!);
        const page = await providers[i]!.listReadyIssues("ready", cursors[i]!, asked);
        expect(page.issues.length).toBeLessThanOrEqual(asked);
        listed[i]!.push(...page.issues.map((issue) => issue.ref.number));
        left -= page.issues.length;
        cursors[i] = page.cursor;
        done[i] = page.cursor === null;
      }
    }
    const every = Array.from({ length: 120 }, (_, k) => k + 1);
    expect(listed).toEqual([every, every]);
  });

  it("does not skip an issue when issues before the cursor leave the list between two calls", async () => {
    const repo = "acme/shifting";
    const at = Date.parse("2026-02-03T00:00:00Z");
    for (let n = 1; n <= 10; n++) gh.state.addIssue(repo, n, { labels: ["ready"], createdAtMs: at + n });
    const p = githubProvider({ id: "apj_shifting", repository: repo, githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId }, { privateKey: keys.privateKey }, { ...config, githubPageSize: 4 });
    const first = await p.listReadyIssues("ready", null, 4);
    expect(first.issues.map((i) => i.ref.number)).toEqual([1, 2, 3, 4]);
    // Three issues already listed are closed: #5 moves onto the first page.
    for (const n of [1, 2, 3]) gh.state.updateIssue(repo, n, { state: "closed", stateReason: "completed" });
    const rest = await p.listReadyIssues("ready", first.cursor, 10);
    expect(rest.issues.map((i) => i.ref.number)).toEqual([5, 6, 7, 8, 9, 10]);
    expect(rest.cursor).toBeNull();
  });

  it("with a since time, lists only the ready issues changed since then", async () => {
    const repo = "acme/since";
    const at = Date.now() - 60_000;
    for (let n = 1; n <= 5; n++) gh.state.addIssue(repo, n, { labels: ["ready"], createdAtMs: at + n });
    const sinceMs = Date.now();
    await new Promise((r) => setTimeout(r, 5));
    gh.state.updateIssue(repo, 4, { title: "changed" });
    const p = githubProvider({ id: "apj_since", repository: repo, githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId }, { privateKey: keys.privateKey }, config);
    const page = await p.listReadyIssues("ready", null, 50, sinceMs);
    expect(page.issues.map((i) => i.ref.number)).toEqual([4]);
    expect(gh.reads().find((r: { path: string }) => r.path === `/repos/${repo}/issues`).query.since).toBe(new Date(sinceMs).toISOString());
  });
});

describe("listReadyIssues page size", () => {
  it("asks GitHub for at most 100 a page, GitHub's own limit", async () => {
    gh.state.addIssue("acme/big", 1, { labels: ["ready"] });
    const p = githubProvider(
      { id: "apj_big", repository: "acme/big", githubApiUrl: gh.url, appId: gh.appId, installationId: gh.installationId },
      { privateKey: keys.privateKey },
      config,
    );
    expect((await p.listReadyIssues("ready", null, 500)).issues.map((i) => i.ref.number)).toEqual([1]);
    expect(gh.reads().find((r: { path: string }) => r.path === "/repos/acme/big/issues").query.per_page).toBe("100");
  });
});

describe("authentication as the App installation", () => {
  // Tokens are shared per API URL and App in an isolate, so each test here has a GitHub of its own.
  let own: Awaited<ReturnType<typeof startFakeGitHub>>;
  beforeEach(async () => {
    own = await startFakeGitHub({ appId: "5151", installationId: "919", publicKey: keys.publicKey });
    own.state.addIssue(REPO, 50, { labels: ["ready"] });
    own.state.label(REPO, 50, "ready");
  });
  afterEach(async () => {
    await own.close();
  });
  const ownProvider = (privateKey: string = keys.privateKey, overrides: Partial<Config> = {}) =>
    githubProvider(
      { id: "apj_auth", repository: REPO, githubApiUrl: own.url, appId: own.appId, installationId: own.installationId },
      { privateKey },
      { ...config, ...overrides },
    );

  it("fetches the installation token once, with the App's JWT, and reuses it for every call", async () => {
    const p = ownProvider();
    await p.getIssue(ref(50));
    await p.listBlockers(ref(50));
    await p.lastReadyTransition(ref(50), "ready");
    await p.listReadyIssues("ready", null, 10);
    expect(own.state.tokensIssued()).toBe(1);
    const tokenRequest = own.requests.find((r: { path: string }) => r.path === `/app/installations/${own.installationId}/access_tokens`);
    expect(tokenRequest.authorization).toMatch(/^bearer [\w-]+\.[\w-]+\.[\w-]+$/i);
    const authorizations = new Set(own.reads().map((r: { authorization: string }) => r.authorization));
    expect(authorizations.size).toBe(1);
    expect([...authorizations][0]).toMatch(/^token ghs_/);
  });

  it("reuses the token across providers of the same App, unless GITHUB_TOKEN_CACHE_MAX is 0", async () => {
    await ownProvider().getIssue(ref(50));
    await ownProvider().getIssue(ref(50));
    expect(own.state.tokensIssued()).toBe(1);
    await ownProvider(keys.privateKey, { githubTokenCacheMax: 0 }).getIssue(ref(50));
    await ownProvider(keys.privateKey, { githubTokenCacheMax: 0 }).getIssue(ref(50));
    expect(own.state.tokensIssued()).toBe(3);
  });

  it("never lends a cached token to a provider that names the same App and installation without its key", async () => {
    await ownProvider().getIssue(ref(50));
    const err = await failure(ownProvider(makeAppKeyPair().privateKey).getIssue(ref(50)));
    expect(err.failure).toBe("unauthorized");
    expect(own.state.tokensIssued()).toBe(1);
    expect(own.reads()).toHaveLength(1);
  });

  it("signs with the key in either PEM form GitHub users hold (PKCS#1 as downloaded, PKCS#8)", async () => {
    expect(await ownProvider(keys.privateKeyPkcs8, { githubTokenCacheMax: 0 }).getIssue(ref(50))).not.toBeNull();
    expect(await ownProvider(keys.privateKey.replace(/\n/g, "\\n"), { githubTokenCacheMax: 0 }).getIssue(ref(50))).not.toBeNull();
    expect(own.state.tokensIssued()).toBe(2);
  });

  it("fails as unauthorized, without retrying, when GitHub refuses the App's key", async () => {
    const other = makeAppKeyPair();
    const err = await failure(ownProvider(other.privateKey).getIssue(ref(50)));
    expect(err.failure).toBe("unauthorized");
    expect(own.requests.filter((r: { path: string }) => r.path.endsWith("/access_tokens"))).toHaveLength(1);
    expect(own.reads()).toHaveLength(0);
  });

  it("fails as unauthorized, naming the installation token, when the installation id is unknown", async () => {
    const err = await failure(
      githubProvider(
        { id: "apj_auth", repository: REPO, githubApiUrl: own.url, appId: own.appId, installationId: "404404" },
        { privateKey: keys.privateKey },
        config,
      ).getIssue(ref(50)),
    );
    expect(err.failure).toBe("unauthorized");
    expect(err.status).toBe(404);
    expect(err.message).toContain("refused an installation token");
    expect(own.reads()).toHaveLength(0);
  });

  it("a refused connection fails as unavailable, naming GitHub's address, and never blames the App's credentials", async () => {
    // A port nothing listens on: the connection is refused before any answer.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const err = await failure(
      githubProvider(
        { id: "apj_refused", repository: REPO, githubApiUrl: `http://127.0.0.1:${port}`, appId: own.appId, installationId: own.installationId },
        { privateKey: keys.privateKey },
        { ...config, githubTokenCacheMax: 0 },
      ).getIssue(ref(50)),
    );
    expect(err.failure).toBe("unavailable");
    expect(err.message).toContain(`could not reach GitHub at http://127.0.0.1:${port}`);
    expect(err.message).not.toMatch(/credentials|App id|private key|refused an installation token/);
  });

  it("fails as unauthorized when the private key is not a key at all", async () => {
    const err = await failure(ownProvider("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----").getIssue(ref(50)));
    expect(err.failure).toBe("unauthorized");
    expect(err.message).toContain("not a PEM RSA private key");
    expect(own.requests).toHaveLength(0);
  });
});

describe("bounded calls", () => {
  it("retries a transient 500 with backoff and succeeds", async () => {
    gh.state.addIssue(REPO, 60, { title: "Flaky" });
    const p = provider();
    await p.getIssue(ref(60)); // the token, first
    gh.requests.length = 0;
    gh.state.fail({ path: `/repos/${REPO}/issues/60`, status: 502, message: "Bad Gateway", times: 2 });
    expect((await p.getIssue(ref(60)))!.title).toBe("Flaky");
    const tries = readsOf(`/repos/${REPO}/issues/60`);
    expect(tries.map((r: { status: number }) => r.status)).toEqual([502, 502, 200]);
    // The nth retry waits n² × GITHUB_RETRY_BASE_MS: 20 ms, then 80 ms.
    expect(tries[2].atMs - tries[0].atMs).toBeGreaterThanOrEqual(100 - 5);
  });

  it("gives up after GITHUB_RETRIES retries of a lasting failure, saying so", async () => {
    gh.state.addIssue(REPO, 61);
    gh.state.fail({ path: `/repos/${REPO}/issues/61`, status: 500, times: 1 + config.githubRetries });
    const err = await failure(provider().getIssue(ref(61)));
    expect(err.failure).toBe("unavailable");
    expect(err.status).toBe(500);
    expect(readsOf(`/repos/${REPO}/issues/61`)).toHaveLength(1 + config.githubRetries);
  });

  it("times a hung answer out within the configured bound, every try", async () => {
    gh.state.addIssue(REPO, 62);
    const p = provider();
    await p.getIssue(ref(62));
    gh.requests.length = 0;
    gh.state.delay({ path: `/repos/${REPO}/issues/62`, delayMs: 10_000, times: 3 });
    const started = Date.now();
    const err = await failure(p.getIssue(ref(62)));
    const elapsed = Date.now() - started;
    expect(err.failure).toBe("timeout");
    expect(err.message).toContain("did not answer within 300 ms");
    // 3 tries of 300 ms plus 20 + 80 ms of backoff, with room for a slow machine, never the 10 s hang.
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(3_000);
    expect(readsOf(`/repos/${REPO}/issues/62`)).toHaveLength(3);
  });

  it("times out an answer whose body stalls, and retries it", async () => {
    gh.state.addIssue(REPO, 66, { title: "Whole" });
    const p = provider();
    await p.getIssue(ref(66));
    gh.requests.length = 0;
    gh.state.stallBody({ path: `/repos/${REPO}/issues/66`, times: 1 });
    expect((await p.getIssue(ref(66)))!.title).toBe("Whole");
    expect(readsOf(`/repos/${REPO}/issues/66`)).toHaveLength(2);

    gh.requests.length = 0;
    gh.state.stallBody({ path: `/repos/${REPO}/issues/66`, times: 3 });
    const err = await failure(p.getIssue(ref(66)));
    expect(err.failure).toBe("timeout");
    expect(readsOf(`/repos/${REPO}/issues/66`)).toHaveLength(3);
  });

  it("waits out a short secondary rate limit as retry-after says, then succeeds", async () => {
    gh.state.addIssue(REPO, 63, { title: "After the wait" });
    const p = provider();
    await p.getIssue(ref(63));
    gh.requests.length = 0;
    gh.state.secondaryRateLimit({ path: `/repos/${REPO}/issues/63`, retryAfterS: 1 });
    expect((await p.getIssue(ref(63)))!.title).toBe("After the wait");
    const tries = readsOf(`/repos/${REPO}/issues/63`);
    expect(tries.map((r: { status: number }) => r.status)).toEqual([429, 200]);
    expect(tries[1].atMs - tries[0].atMs).toBeGreaterThanOrEqual(1_000 - 5);
  });

  it("waits out a primary rate limit that resets soon, then succeeds", async () => {
    gh.state.addIssue(REPO, 64);
    const p = provider();
    await p.getIssue(ref(64));
    gh.requests.length = 0;
    gh.state.rateLimit({ path: `/repos/${REPO}/issues/64`, resetInS: 1 });
    expect(await p.getIssue(ref(64))).not.toBeNull();
    const tries = readsOf(`/repos/${REPO}/issues/64`);
    expect(tries.map((r: { status: number }) => r.status)).toEqual([403, 200]);
    expect(tries[1].atMs - tries[0].atMs).toBeGreaterThanOrEqual(1_000);
  });

  it("fails at once, clearly, when the rate limit resets later than GITHUB_RATE_LIMIT_WAIT_MAX_MS", async () => {
    gh.state.addIssue(REPO, 65);
    const p = provider();
    await p.getIssue(ref(65));
    gh.requests.length = 0;
    gh.state.rateLimit({ path: `/repos/${REPO}/issues/65`, resetInS: 3_600 });
    const started = Date.now();
    const err = await failure(p.getIssue(ref(65)));
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(err.failure).toBe("rate_limited");
    expect(err.retryAfterMs).toBeGreaterThan(3_590_000);
    expect(err.retryAfterMs).toBeLessThanOrEqual(3_601_000); // the reset is a whole second
    expect(err.message).toMatch(/rate limit is exhausted; it can be tried again in 3[56]\d\d s/);
    expect(readsOf(`/repos/${REPO}/issues/65`)).toHaveLength(1);

    gh.state.secondaryRateLimit({ path: `/repos/${REPO}/issues/65`, retryAfterS: 600 });
    const secondary = await failure(p.getIssue(ref(65)));
    expect(secondary.failure).toBe("rate_limited");
    expect(secondary.retryAfterMs).toBe(600_000);
  });
});

describe("the outbound address policy", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("a stored api_url the policy refuses today sends nothing: the call fails as forbidden, naming the address", async () => {
    // Answered here, never sent, should the check be missing.
    const sent = vi.spyOn(globalThis, "fetch").mockRejectedValue(new Error("no request may leave the test"));
    const p = githubProvider(
      { id: "apj_private", repository: REPO, githubApiUrl: "https://10.20.30.40/api/v3", appId: gh.appId, installationId: gh.installationId },
      { privateKey: keys.privateKey },
      config,
    );
    const err = await failure(p.getIssue(ref(1)));
    expect(err.failure).toBe("forbidden");
    expect(err.message).toContain("10.20.30.40 is a private address");
    expect(sent).not.toHaveBeenCalled();
  });

  it("follows a redirect within the policy, and never one outside it", async () => {
    gh.state.addIssue(REPO, 81, { title: "Moved" });
    // The fake GitHub is allowed by its address only: `localhost` names the same server but is refused,
    // so a redirect there that were followed would stay on this machine.
    const p = provider({ outboundAllowLoopback: false, outboundAllowHosts: ["127.0.0.1"] });
    gh.state.fail({ path: `/repos/${REPO}/issues/80`, status: 301, headers: { location: `${gh.url}/repos/${REPO}/issues/81` } });
    expect((await p.getIssue(ref(80)))?.title).toBe("Moved");

    gh.requests.length = 0;
    const elsewhere = gh.url.replace("127.0.0.1", "localhost");
    gh.state.fail({ path: `/repos/${REPO}/issues/82`, status: 307, headers: { location: `${elsewhere}/repos/${REPO}/issues/81` }, times: 1 + config.githubRetries });
    const err = await failure(p.getIssue(ref(82)));
    expect(err.failure).toBe("forbidden");
    expect(err.message).toContain("redirect was not followed, localhost is a loopback name");
    expect(gh.reads().map((r: { path: string }) => r.path)).toEqual(Array(1 + config.githubRetries).fill(`/repos/${REPO}/issues/82`));
  });
});

describe("GITHUB_* configuration", () => {
  it("reads each GITHUB_* var, and refuses a page size GitHub would not honour", () => {
    const loaded = loadConfig({
      GITHUB_REQUEST_TIMEOUT_MS: "2500",
      GITHUB_RETRIES: "5",
      GITHUB_RETRY_BASE_MS: "250",
      GITHUB_RATE_LIMIT_WAIT_MAX_MS: "9000",
      GITHUB_PAGE_SIZE: "50",
      GITHUB_PAGES_MAX: "4",
      GITHUB_TOKEN_CACHE_MAX: "0",
    });
    expect(loaded).toMatchObject({
      githubRequestTimeoutMs: 2_500,
      githubRetries: 5,
      githubRetryBaseMs: 250,
      githubRateLimitWaitMaxMs: 9_000,
      githubPageSize: 50,
      githubPagesMax: 4,
      githubTokenCacheMax: 0,
    });
    expect(() => loadConfig({ GITHUB_PAGE_SIZE: "101" })).toThrow(/GITHUB_PAGE_SIZE must be between 1 and 100/);
    expect(() => loadConfig({ GITHUB_PAGES_MAX: "0" })).toThrow(/GITHUB_PAGES_MAX must be at least 1/);
    expect(() => loadConfig({ GITHUB_REQUEST_TIMEOUT_MS: "0" })).toThrow(/GITHUB_REQUEST_TIMEOUT_MS must be at least 1/);
  });
});

describe("toPkcs8Pem", () => {
  it("wraps GitHub's PKCS#1 key into the PKCS#8 form of the same key, and leaves PKCS#8 as it is", () => {
    const converted = toPkcs8Pem(keys.privateKey);
    expect(converted).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(createPrivateKey(converted).export({ type: "pkcs8", format: "pem" })).toBe(keys.privateKeyPkcs8);
    expect(toPkcs8Pem(keys.privateKeyPkcs8)).toBe(keys.privateKeyPkcs8);
  });

  it("refuses anything that is not a PEM RSA private key", () => {
    expect(() => toPkcs8Pem("not a key")).toThrow(/not a PEM RSA private key/);
    expect(() => toPkcs8Pem(keys.publicKey)).toThrow(/not a PEM RSA private key/);
  });
});
