// The Linear provider (src/autopilot/linear/) against the Linear stand-in on loopback
// (test/fake-linear/server.mjs), which executes every request against Linear's schema: the
// production code, over real HTTP, through @linear/sdk's GraphQL client, with the project's API key.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULTS, type Config } from "../../src/config";
import { runFor } from "../../src/autopilot/admission";
import { checkEligibility } from "../../src/autopilot/eligibility";
import { headroomOf } from "../../src/autopilot/linear/client";
import { LinearError } from "../../src/autopilot/linear/errors";
import { linearProvider } from "../../src/autopilot/linear/provider";
import type { TicketRef } from "../../src/autopilot/provider";
import { checkHumanReadiness } from "../../src/autopilot/readiness";
import { reserveReason } from "../../src/autopilot/reconcile-state";
import type { LinearTracker } from "../../src/autopilot/tracker-config";
// @ts-expect-error: a plain ES module without types
import { startFakeLinear } from "../fake-linear/server.mjs";

const config: Config = { ...DEFAULTS, linearRequestTimeoutMs: 2_000, linearRetries: 1, linearRetryBaseMs: 10, linearPageSize: 2, linearPagesMax: 5 };

let fake: Awaited<ReturnType<typeof startFakeLinear>>;
const ref = (number: number, team = "ENG"): TicketRef => ({ provider: "linear", repository: `acme/${team}`, number });

function tracker(overrides: Partial<LinearTracker> = {}): LinearTracker {
  return { kind: "linear", apiUrl: fake.url, workspace: "acme", team: "ENG", project: null, readyLabel: "ready", readyState: null, reviewState: "In Review", doneStates: [], automationAccounts: [], ...overrides };
}

function provider(overrides: Partial<LinearTracker> = {}, token: string = fake.apiKey) {
  return linearProvider({ id: "apj_linear", tracker: tracker(overrides) }, { trackerToken: token }, config);
}

async function issue(opts: Record<string, unknown> = {}) {
  return (await fake.state.createIssue({ team: "ENG", title: "Add a widget", description: "## Agent Brief\nDo it.", ...opts })).value as { number: number };
}

beforeAll(async () => {
  fake = await startFakeLinear({ urlKey: "acme" });
  fake.state.addTeam("ENG", "Engineering");
  fake.state.addLabel("ready");
  fake.state.addLabel("bug");
});

afterAll(async () => {
  await fake.close();
});

describe("reading an issue", () => {
  it("answers its identifier, text, workflow state, labels and URL as admission reads them", async () => {
    const i = await issue({ labels: ["bug"] });
    const facts = await provider().getIssue(ref(i.number));
    expect(facts).toMatchObject({
      ref: ref(i.number),
      title: "Add a widget",
      body: "## Agent Brief\nDo it.",
      state: "open",
      stateReason: null,
      status: "Todo",
      labels: ["bug"],
    });
    expect(facts!.url).toContain(`/acme/issue/ENG-${i.number}`);
    expect(facts!.updatedAtMs).toBeGreaterThan(0);
  });

  it("reads a missing issue as none, and a completed one as closed as completed", async () => {
    expect(await provider().getIssue(ref(9_999))).toBeNull();
    const i = await issue();
    await fake.state.complete(`ENG-${i.number}`);
    expect(await provider().getIssue(ref(i.number))).toMatchObject({ state: "closed", stateReason: "completed", status: "Done" });
  });

  it("sends the API key as Linear expects it, and a refused key is unauthorized", async () => {
    const i = await issue();
    await expect(provider({}, "lin_api_not_a_key_of_anyone").getIssue(ref(i.number))).rejects.toMatchObject({ failure: "unauthorized" });
    expect(fake.requests.at(-1).authorization).toBe("lin_api_not_a_key_of_anyone");
  });
});

describe("blockers", () => {
  it("are the issues whose blocks relation names it; done when completed or in a configured done state, else waiting", async () => {
    const blocked = await issue();
    const open = await issue({ title: "open blocker" });
    const shipped = await issue({ title: "shipped blocker", state: "In Review" });
    const done = await issue({ title: "done blocker" });
    for (const b of [open, shipped, done]) await fake.state.block(`ENG-${b.number}`, `ENG-${blocked.number}`);
    await fake.state.complete(`ENG-${done.number}`);
    const p = provider({ doneStates: ["In Review"] });
    const blockers = await p.listBlockers(ref(blocked.number));
    expect(blockers.map((b) => [b.ref.number, b.facts?.state, b.facts?.stateReason]).sort()).toEqual(
      [[open.number, "open", null], [shipped.number, "closed", "completed"], [done.number, "closed", "completed"]].sort(),
    );
    const facts = (await p.getIssue(ref(blocked.number)))!;
    const policy = { provider: "linear" as const, repository: "acme/widgets", ticketScope: "acme/ENG", readyLabel: "ready", doneStates: ["completed"], doneLabels: [] };
    const verdict = checkEligibility(policy, { ...facts, labels: ["ready"] }, blockers, { ok: true, brief: {} as never });
    expect(verdict).toEqual({ eligible: false, reasons: [`blocked by ENG-${open.number}, which is still open`] });
  });
});

describe("who made an issue ready", () => {
  it("names the person who added the ready label, whom readiness accepts", async () => {
    const i = await issue();
    await fake.state.label(`ENG-${i.number}`, "ready", fake.state.person("Alice Human"));
    const transition = await provider().lastReadyTransition(ref(i.number), "ready");
    expect(transition?.actor).toEqual({ login: "alicehuman", type: "User", viaApp: null });
    const verdict = checkHumanReadiness({ provider: "linear", readyLabel: "ready", automationAccounts: [], trustedActorAssumption: false }, { transition });
    expect(verdict).toMatchObject({ ok: true, basis: "human" });
  });

  it("refuses an OAuth application's change and an integration's, naming them", async () => {
    const byApp = await issue();
    await fake.state.label(`ENG-${byApp.number}`, "ready", fake.state.app("Triage Bot"));
    const byIntegration = await issue();
    await fake.state.label(`ENG-${byIntegration.number}`, "ready", fake.state.integration("workflow"));
    const policy = { provider: "linear" as const, readyLabel: "ready", automationAccounts: [], trustedActorAssumption: false };
    for (const [n, name] of [[byApp.number, "triagebot, an account of type App"], [byIntegration.number, "workflow, an account of type Bot"]] as const) {
      const transition = await provider().lastReadyTransition(ref(n), "ready");
      const verdict = checkHumanReadiness(policy, { transition });
      expect(verdict.ok).toBe(false);
      expect(!verdict.ok && verdict.reason).toContain(name);
    }
  });

  it("with a ready state, names who moved the issue there, and refuses a configured automation account", async () => {
    const i = await issue({ state: "Backlog" });
    const person = fake.state.person("Robo Account");
    await fake.state.move(`ENG-${i.number}`, "Todo", person);
    const transition = await provider({ readyLabel: null, readyState: "Todo" }).lastReadyTransition(ref(i.number), "Todo");
    expect(transition?.actor?.type).toBe("User");
    const login = transition!.actor!.login;
    const verdict = checkHumanReadiness({ provider: "linear", readyLabel: "Todo", readyState: "Todo", automationAccounts: [login], trustedActorAssumption: false }, { transition });
    expect(login).toBe("roboaccount");
    expect(verdict).toEqual({ ok: false, reason: `the move to the ready state "Todo" was made by roboaccount, one of the project's automation accounts; a person must make it` });
  });
});

describe("a project ready by workflow state", () => {
  it("admits by the issue's state, not by a label, and says which state it is in when it is not ready", async () => {
    const i = await issue({ state: "Backlog" });
    const p = provider({ readyLabel: null, readyState: "Todo" });
    const policy = { provider: "linear" as const, repository: "acme/widgets", ticketScope: "acme/ENG", readyLabel: "Todo", readyState: "Todo", doneStates: ["completed"], doneLabels: [] };
    const brief = { ok: true as const, brief: {} as never };
    const before = checkEligibility(policy, (await p.getIssue(ref(i.number)))!, [], brief);
    expect(before).toEqual({ eligible: false, reasons: ['the issue is in the state "Backlog", not the ready state "Todo"'] });
    await fake.state.move(`ENG-${i.number}`, "Todo");
    expect(checkEligibility(policy, (await p.getIssue(ref(i.number)))!, [], brief).eligible).toBe(true);
    const listed: TicketRef[] = [];
    let cursor: string | null = null;
    do {
      const page = await p.listReadyIssues("Todo", cursor, 50);
      listed.push(...page.issues.map((r) => r.ref));
      cursor = page.cursor;
    } while (cursor !== null && listed.length < 100);
    expect(listed).toContainEqual(ref(i.number));
  });
});

describe("listing ready issues", () => {
  it("walks the team's open issues carrying the label by a stable cursor, and only those changed since when asked", async () => {
    await fake.state.addTeam("LST", "Listing");
    const made = [];
    for (let n = 0; n < 3; n += 1) made.push((await fake.state.createIssue({ team: "LST", title: `ready ${n}`, labels: ["ready"] })).value.number);
    await fake.state.createIssue({ team: "LST", title: "not ready" });
    const p = provider({ team: "LST" });
    const first = await p.listReadyIssues("ready", null, 2);
    const rest = await p.listReadyIssues("ready", first.cursor, 2);
    const walked = [...first.issues, ...rest.issues].map((i) => i.ref);
    expect(walked.sort((a, b) => a.number - b.number)).toEqual(made.map((n) => ref(n, "LST")));
    expect(rest.cursor).toBeNull();
    const since = Date.now();
    await new Promise((r) => setTimeout(r, 5));
    await fake.state.edit(`LST-${made[1]}`, { title: "changed" });
    expect((await p.listReadyIssues("ready", null, 2, since)).issues.map((i) => i.ref.number)).toEqual([made[1]]);
  });
});

describe("writing back", () => {
  it("posts a comment once and finds it by its marker", async () => {
    const i = await issue();
    const p = provider();
    expect(await p.findComment(ref(i.number), "<!-- docket:run=r1 -->")).toBeNull();
    const posted = await p.postComment(ref(i.number), "Docket opened a pull request: https://github.com/acme/widgets/pull/1\n\n<!-- docket:run=r1 -->");
    expect(await p.findComment(ref(i.number), "<!-- docket:run=r1 -->")).toEqual(posted);
    expect(fake.state.commentsOf(`ENG-${i.number}`)).toHaveLength(1);
  });

  it("links the pull request to the issue as an attachment, once however often it is linked", async () => {
    const i = await issue();
    const p = provider();
    const pr = { url: "https://github.com/acme/widgets/pull/7", title: "Pull request #7 of Docket run r1" };
    const linked = await p.linkPullRequest!(ref(i.number), pr);
    expect(await p.linkPullRequest!(ref(i.number), pr)).toEqual(linked);
    expect(linked.url).toBe(pr.url);
    expect(fake.state.attachmentsOf(`ENG-${i.number}`)).toEqual([expect.objectContaining({ id: linked.id, url: pr.url, title: pr.title })]);
    expect(fake.state.commentsOf(`ENG-${i.number}`)).toEqual([]);
  });

  it("moves a published issue to the review state and takes its ready label off", async () => {
    const i = await issue({ labels: ["ready", "bug"] });
    await provider().moveLabels(ref(i.number), { remove: ["ready"], add: ["In Review"] });
    expect(fake.state.stateOf(`ENG-${i.number}`).name).toBe("In Review");
    expect(fake.state.labelsOf(`ENG-${i.number}`)).toEqual(["bug"]);
    await expect(provider().moveLabels(ref(i.number), { remove: [], add: ["Nowhere"] })).rejects.toThrow(/no workflow state "Nowhere"/);
  });
});

describe("Linear's rate limits", () => {
  it("keep the budget Linear's headers state, and a refused request is rate_limited", async () => {
    const p = provider();
    const i = await issue();
    await p.getIssue(ref(i.number));
    const headroom = await p.headroom!();
    expect(headroom).toMatchObject({ limit: expect.any(Number), remaining: expect.any(Number) });
    expect(headroom!.remaining).toBeLessThan(headroom!.limit);
    fake.state.rateLimit(1);
    const err = await p.getIssue(ref(i.number)).catch((e) => e);
    expect(err).toBeInstanceOf(LinearError);
    expect(err.failure).toBe("rate_limited");
  });
});

describe("the headroom reconciliation keeps its reserve against", () => {
  const headers = (requests: number, complexity: number) =>
    new Headers({
      "x-ratelimit-requests-limit": "5000",
      "x-ratelimit-requests-remaining": String(requests),
      "x-ratelimit-requests-reset": "1000",
      "x-ratelimit-complexity-limit": "250000",
      "x-ratelimit-complexity-remaining": String(complexity),
      "x-ratelimit-complexity-reset": "2000",
    });

  it("is Linear's requests left, or their share of the complexity left when that budget is tighter", () => {
    const of = "the Linear API key";
    expect(headroomOf(headers(4_000, 250_000))).toEqual({ remaining: 4_000, limit: 5_000, resetAtMs: 1_000, of });
    expect(headroomOf(headers(4_000, 25_000))).toEqual({ remaining: 500, limit: 5_000, resetAtMs: 2_000, of });
    expect(headroomOf(new Headers())).toBeNull();
  });

  it("pauses reconciliation under the reserve, naming the Linear API key's budget", () => {
    const headroom = { ...headroomOf(headers(100, 250_000))!, resetAtMs: Date.now() + 60_000 };
    expect(reserveReason(headroom, { ...config, autopilotGithubReserve: 500 })).toMatch(/^paused: the Linear API key has 100 of 5000 requests left this hour, under the reserve of 500/);
  });
});

describe("the run a Linear issue becomes", () => {
  it("clones and pushes the project's GitHub repository, not the Linear issue's page", async () => {
    const i = await issue();
    const facts = (await provider().getIssue(ref(i.number)))!;
    const project = {
      id: "apj_linear",
      orgId: "org_1",
      provider: "linear" as const,
      repository: "acme/widgets",
      ticketScope: "acme/ENG",
      repositoryPage: "https://github.com/acme/widgets",
      readyLabel: "ready",
      reviewLabel: "In Review",
      briefHeading: "Agent Brief",
      queueCapacity: 10,
      run: { labels: [], priority: 0, launch: { command: ["agent"] } },
    };
    const run = runFor(project, facts, { eligible: true, snapshot: null }, config);
    expect(run.repository).toEqual({ url: "https://github.com/acme/widgets" });
    expect(run.metadata).toMatchObject({ autopilot_ticket: `linear:acme/ENG-${i.number}`, issue_url: facts.url });
  });
});
