// The pure rules of autopilot admission (../shared/spec/run-lifecycle.md, "Admission" and "Human
// readiness authorization"): the Agent Brief, eligibility and human readiness. Senders, actors and
// issues come from GitHub's real webhook payloads (@octokit/webhooks-examples), changed only where
// a case needs a field GitHub would send differently.

import examples from "@octokit/webhooks-examples";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseAgentBrief } from "../../src/autopilot/brief";
import { checkEligibility, type EligibilityPolicy } from "../../src/autopilot/eligibility";
import type { Blocker, IssueFacts, ReadyTransition } from "../../src/autopilot/provider";
import { actorFromGitHub, checkHumanReadiness, type ReadinessPolicy } from "../../src/autopilot/readiness";

type Json = Record<string, any>;

function example(name: string, action: string, pick: (e: Json) => boolean = () => true): Json {
  const def = (examples as unknown as Json[]).find((d) => d.name === name);
  const found = def?.examples.find((e: Json) => e.action === action && pick(e));
  if (!found) throw new Error(`no ${name}.${action} example`);
  return structuredClone(found);
}

/** issues.labeled as GitHub sent it: Codertocat (a User) labels Codertocat/Hello-World#1. */
const labeled = example("issues", "labeled");
/** A real Bot sender: renovate[bot]. */
const botSender = example("workflow_job", "in_progress", (e) => e.sender?.type === "Bot").sender;
/** A real app that performed a change: GitHub Actions. */
const actionsApp = example("workflow_job", "queued", (e) => e.deployment?.performed_via_github_app).deployment.performed_via_github_app;

const BRIEF_BODY = ["Context for humans.", "", "## Agent Brief", "goal: Say why login failed.", "acceptance:", "- a wrong password says so", "scope:", "- src/login/", ""].join("\n");

function issueFacts(payload: Json, overrides: Partial<IssueFacts> = {}): IssueFacts {
  const issue = payload.issue;
  return {
    ref: { provider: "github", repository: payload.repository.full_name, number: issue.number },
    title: issue.title,
    body: issue.body ?? "",
    state: issue.state,
    stateReason: issue.state_reason ?? null,
    labels: (issue.labels ?? []).map((l: Json) => l.name),
    url: issue.html_url,
    updatedAtMs: Date.parse(issue.updated_at),
    ...overrides,
  };
}

const policy: EligibilityPolicy = {
  provider: "github",
  repository: "codertocat/hello-world",
  readyLabel: "bug",
  doneStates: ["completed"],
  doneLabels: ["shipped"],
};

function blocker(number: number, facts: Partial<IssueFacts> | null, unreadable: string | null = null): Blocker {
  const ref = { provider: "github" as const, repository: "Codertocat/Hello-World", number };
  return { ref, facts: facts ? issueFacts(labeled, { ...facts, ref }) : null, unreadable };
}

describe("the Agent Brief", () => {
  it("reads goal, acceptance, scope and model from the section under the heading", () => {
    const body = [
      "Intro",
      "",
      "### agent brief",
      "<!-- the agent reads this -->",
      "```",
      "goal: Make the login error clear.",
      "It should say which field is wrong.",
      "acceptance:",
      "- a wrong password says so",
      "* the message clears on typing",
      "scope:",
      "- src/login/**",
      "model: claude-sonnet-4",
      "```",
      "### Notes",
      "goal: not part of the brief",
    ].join("\r\n");
    expect(parseAgentBrief(body, "Agent Brief")).toEqual({
      ok: true,
      brief: {
        goal: "Make the login error clear.\nIt should say which field is wrong.",
        acceptance: ["a wrong password says so", "the message clears on typing"],
        scope: ["src/login/**"],
        model: "claude-sonnet-4",
      },
    });
  });

  it("uses the configured heading, and only a goal is required", () => {
    expect(parseAgentBrief("## Task\ngoal: fix it\n", "Task")).toEqual({ ok: true, brief: { goal: "fix it", acceptance: [], scope: [], model: null } });
    expect(parseAgentBrief("## Task\ngoal: fix it\n", "Agent Brief")).toEqual({
      ok: false,
      errors: [expect.stringContaining('the issue has no "## Agent Brief" section')],
    });
  });

  it("reports every mistake, each on the line of the issue body it is on", () => {
    const body = ["# Title", "## Agent Brief", "goal:", "acceptence:", "- typo'd key", "scope:", "- ../outside", "- /etc/passwd", "model: two words", "goal: again", "stray text"].join("\n");
    const result = parseAgentBrief(body, "Agent Brief");
    expect(result.ok).toBe(false);
    expect(!result.ok && result.errors).toEqual([
      'line 3: "goal" is empty',
      'line 4: "acceptence" is not a brief key; the keys are goal, acceptance, scope, model',
      'line 5: a list entry belongs under "acceptance:" or "scope:"',
      'line 7: scope entry "../outside" must stay inside the repository (no ..)',
      'line 8: scope entry "/etc/passwd" must be relative to the repository root (no leading /)',
      'line 9: "model" is not a model name (letters, digits and . _ : / -, at most 100)',
      'line 10: "goal" is given twice (first on line 3); keep one',
      'line 11: this line belongs to no key; write "goal: …" or another key (goal, acceptance, scope, model)',
    ]);
  });

  it("refuses an empty section, a missing goal, a list written inline, and two sections", () => {
    expect(parseAgentBrief("## Agent Brief\n\n## Next\n", "Agent Brief")).toEqual({ ok: false, errors: ['the "## Agent Brief" section is empty; write at least "goal: …"'] });
    expect(parseAgentBrief("## Agent Brief\nmodel: x\n", "Agent Brief")).toEqual({
      ok: false,
      errors: ['the "## Agent Brief" section has no "goal: …" line saying what the agent should achieve'],
    });
    expect(parseAgentBrief("## Agent Brief\ngoal: g\nscope: src/\n", "Agent Brief")).toEqual({
      ok: false,
      errors: ['line 3: "scope" is a list; put each entry on its own line starting with "- "'],
    });
    expect(parseAgentBrief("## Agent Brief\ngoal: a\n## Agent Brief\ngoal: b\n", "Agent Brief")).toEqual({
      ok: false,
      errors: ['the issue has 2 "## Agent Brief" sections; keep one'],
    });
  });

  it("reads the example docs/autopilot.md gives", () => {
    const doc = readFileSync(new URL("../../docs/autopilot.md", import.meta.url), "utf8");
    const example = /```markdown\n([\s\S]*?)\n```/.exec(doc)![1];
    expect(parseAgentBrief(`Some context.\n\n${example}`, "Agent Brief")).toMatchObject({
      ok: true,
      brief: { goal: expect.stringContaining("\n"), acceptance: [expect.any(String), expect.any(String)], scope: ["src/login/**", "test/login.test.ts"], model: "claude-sonnet-4" },
    });
  });

  it("refuses a real issue body without a brief (GitHub's example issue)", () => {
    const result = parseAgentBrief(labeled.issue.body ?? "", "Agent Brief");
    expect(result.ok).toBe(false);
  });
});

describe("eligibility", () => {
  const ready = () => issueFacts(labeled, { body: BRIEF_BODY });
  const brief = (issue: IssueFacts) => parseAgentBrief(issue.body, "Agent Brief");

  it("admits an open, labelled issue of the repository with a valid brief and done blockers, with its snapshot", () => {
    const issue = ready();
    const blockers = [blocker(2, { state: "closed", stateReason: "completed" }), blocker(3, { state: "open", labels: ["Shipped"] })];
    const result = checkEligibility(policy, issue, blockers, brief(issue), 1_700_000_000_000);
    expect(result).toEqual({
      eligible: true,
      snapshot: {
        ticket: "github:Codertocat/Hello-World#1",
        issue: {
          repository: "Codertocat/Hello-World",
          number: 1,
          title: labeled.issue.title,
          url: labeled.issue.html_url,
          state: "open",
          stateReason: null,
          labels: ["bug"],
          updatedAtMs: Date.parse(labeled.issue.updated_at),
        },
        brief: { goal: "Say why login failed.", acceptance: ["a wrong password says so"], scope: ["src/login/"], model: null },
        blockers: [
          expect.objectContaining({ ticket: "github:Codertocat/Hello-World#2", done: true, state: "closed", stateReason: "completed" }),
          expect.objectContaining({ ticket: "github:Codertocat/Hello-World#3", done: true, state: "open", why: expect.stringContaining('"shipped"') }),
        ],
        evaluatedAtMs: 1_700_000_000_000,
      },
    });
  });

  it("gives every reason at once, not only the first", () => {
    const issue = issueFacts(labeled, { ref: { provider: "github", repository: "someone/else", number: 1 }, state: "closed", stateReason: "completed", labels: [], body: "" });
    const blockers = [
      blocker(4, { state: "open", labels: [] }),
      blocker(5, { state: "closed", stateReason: "not_planned" }),
      blocker(6, null, "404 Not Found: the installation cannot see Codertocat/Hello-World#6"),
    ];
    const result = checkEligibility(policy, issue, blockers, brief(issue));
    expect(result).toEqual({
      eligible: false,
      reasons: [
        "the issue is in github:someone/else, not in the project's repository github:codertocat/hello-world",
        "the issue is closed (completed)",
        'the issue does not carry the ready label "bug"',
        expect.stringMatching(/^Agent Brief: the issue has no "## Agent Brief" section/),
        "blocked by Codertocat/Hello-World#4, which is still open",
        "blocked by Codertocat/Hello-World#5, closed as not_planned, which does not count as done (done states: completed)",
        "blocked by Codertocat/Hello-World#6, which Docket cannot read (404 Not Found: the installation cannot see Codertocat/Hello-World#6), so it does not count as done",
      ],
    });
  });

  it("counts a blocker closed with a state reason only when the mapping lists it", () => {
    const issue = ready();
    const notPlanned = [blocker(7, { state: "closed", stateReason: "not_planned" })];
    expect(checkEligibility(policy, issue, notPlanned, brief(issue)).eligible).toBe(false);
    expect(checkEligibility({ ...policy, doneStates: ["completed", "not_planned"] }, issue, notPlanned, brief(issue)).eligible).toBe(true);
  });

  it("refuses an issue whose ready label was removed, or whose brief is invalid", () => {
    const unlabelled = issueFacts(labeled, { body: BRIEF_BODY, labels: ["enhancement"] });
    expect(checkEligibility(policy, unlabelled, [], brief(unlabelled))).toEqual({ eligible: false, reasons: ['the issue does not carry the ready label "bug"'] });
    const badBrief = issueFacts(labeled, { body: "## Agent Brief\ngoal: x\nscope:\n- ../up\n" });
    expect(checkEligibility(policy, badBrief, [], brief(badBrief))).toEqual({
      eligible: false,
      reasons: ['Agent Brief: line 4: scope entry "../up" must stay inside the repository (no ..)'],
    });
  });
});

describe("human readiness", () => {
  const policyOf = (overrides: Partial<ReadinessPolicy> = {}): ReadinessPolicy => ({
    readyLabel: "ready",
    automationAccounts: ["ci-robot"],
    trustedActorAssumption: false,
    ...overrides,
  });
  const human = actorFromGitHub(labeled.sender)!;
  const transitionBy = (actor: ReturnType<typeof actorFromGitHub>): ReadyTransition => ({ eventId: "9001", atMs: Date.parse(labeled.issue.updated_at), actor });

  it("accepts a User sender whose ready label the timeline attributes to a person", () => {
    expect(human).toEqual({ login: "Codertocat", type: "User", viaApp: null });
    expect(checkHumanReadiness(policyOf(), { sender: human, transition: transitionBy(human) })).toEqual({ ok: true, basis: "human", actor: "Codertocat" });
    // Reconciliation has no sender: the timeline alone decides.
    expect(checkHumanReadiness(policyOf(), { transition: transitionBy(human) })).toEqual({ ok: true, basis: "human", actor: "Codertocat" });
  });

  it("refuses a Bot sender", () => {
    const bot = actorFromGitHub(botSender)!;
    expect(bot.type).toBe("Bot");
    const result = checkHumanReadiness(policyOf(), { sender: bot, transition: transitionBy(human) });
    expect(result).toEqual({ ok: false, reason: `the change was sent by ${bot.login}, an account of type Bot, not a person; only a person's ready label admits an issue` });
  });

  it("refuses an Organization sender", () => {
    const org = actorFromGitHub(example("code_scanning_alert", "created", (e) => e.sender?.type === "Organization").sender)!;
    expect(org.type).toBe("Organization");
    expect(checkHumanReadiness(policyOf(), { sender: org, transition: transitionBy(human) })).toEqual({
      ok: false,
      reason: `the change was sent by ${org.login}, an account of type Organization, not a person; only a person's ready label admits an issue`,
    });
  });

  it("refuses a [bot] login even when GitHub calls it a User", () => {
    const sender = actorFromGitHub({ ...labeled.sender, login: "docket-helper[bot]" })!;
    const result = checkHumanReadiness(policyOf(), { sender, transition: transitionBy(human) });
    expect(result).toEqual({ ok: false, reason: "the change was sent by docket-helper[bot], a bot account, not a person; only a person's ready label admits an issue" });
  });

  it("refuses a configured automation account, as sender and as the label's actor, whatever its case", () => {
    const robot = actorFromGitHub({ ...labeled.sender, login: "CI-Robot" })!;
    expect(checkHumanReadiness(policyOf(), { sender: robot, transition: transitionBy(human) })).toEqual({
      ok: false,
      reason: "the change was sent by CI-Robot, one of the project's automation accounts; only a person's ready label admits an issue",
    });
    expect(checkHumanReadiness(policyOf(), { sender: human, transition: transitionBy(robot) })).toEqual({
      ok: false,
      reason: 'the ready label "ready" was added by CI-Robot, one of the project\'s automation accounts; a person must add it',
    });
  });

  it("refuses a label the timeline says an app added with a person's token", () => {
    const viaApp = actorFromGitHub(labeled.sender, actionsApp)!;
    expect(viaApp).toEqual({ login: "Codertocat", type: "User", viaApp: "github-actions" });
    expect(checkHumanReadiness(policyOf({ trustedActorAssumption: true }), { sender: human, transition: transitionBy(viaApp) })).toEqual({
      ok: false,
      reason: 'the ready label "ready" was added by Codertocat through the app github-actions, which is automation acting for them, not the person; a person must add it',
    });
  });

  it("refuses an unknown actor, even under the trusted-actor assumption", () => {
    for (const trusted of [false, true]) {
      expect(checkHumanReadiness(policyOf({ trustedActorAssumption: trusted }), { sender: human, transition: transitionBy(null) })).toEqual({
        ok: false,
        reason: 'GitHub does not say who added the ready label "ready" (event 9001); an unknown actor is not taken for a person',
      });
    }
  });

  it("refuses a label with no recorded transition: a label already present never establishes readiness", () => {
    const reason = 'GitHub records no addition of the ready label "ready" to this issue, so no person can be named for it; a label already present does not count: remove it and add it again';
    expect(checkHumanReadiness(policyOf(), { sender: human, transition: null })).toEqual({ ok: false, reason });
    expect(checkHumanReadiness(policyOf({ trustedActorAssumption: true }), { transition: null })).toEqual({ ok: false, reason });
  });

  it("with the trusted-actor assumption on, accepts a User sender without contrary evidence and says it relied on the assumption", () => {
    expect(checkHumanReadiness(policyOf({ trustedActorAssumption: true }), { sender: human, transition: null })).toEqual({
      ok: true,
      basis: "trusted_actor_assumption",
      actor: "Codertocat",
    });
    // The assumption never overrides evidence of automation.
    const bot = actorFromGitHub(botSender)!;
    expect(checkHumanReadiness(policyOf({ trustedActorAssumption: true }), { sender: bot, transition: null }).ok).toBe(false);
  });
});
