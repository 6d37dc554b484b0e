// The state table, exhaustively: every permitted transition is reachable through a command of
// decide(), and every pair the table does not permit is refused (../shared/DESIGN.md).

import { describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import { decide } from "../../src/run/decide";
import { canTransition, RUN_STATES, TRANSITIONS, type RunState } from "../../src/run/states";
import type { RunCommand, RunRecord } from "../../src/run/types";

const NOW = 1_800_000_000_000;
const M = "mch_a";

function run(state: RunState, extra: Partial<RunRecord> = {}): RunRecord {
  const held = state === "claimed" || state === "implementing" || state === "pausing";
  return {
    id: "run_000000000000000000000001",
    orgId: "org_a",
    state,
    attempt: held || state === "publishing" ? 1 : 0,
    version: 5,
    brief: "b",
    repository: null,
    labels: [],
    priority: 0,
    launch: { protocol: "process", command: ["true"], image: null, env: {} },
    callbackUrl: null,
    metadata: {},
    continuation: null,
    hold: false,
    machineId: held ? M : null,
    sandboxId: state === "implementing" || state === "pausing" ? "sbx" : null,
    phase: null,
    claimedAtMs: held ? NOW - 1000 : null,
    launchedAtMs: state === "implementing" || state === "pausing" ? NOW - 500 : null,
    leaseExpiresAtMs: held ? NOW + 60_000 : null,
    launchDeadlineAtMs: state === "claimed" ? NOW + 60_000 : null,
    lastReportAtMs: null,
    queuedAtMs: NOW - 2000,
    notBeforeMs: NOW - 2000,
    stopRequest: null,
    lastError: null,
    blocker: null,
    artifact: null,
    costCents: null,
    steps: held ? [{ attempt: 1, machineId: M, claimedAtMs: NOW - 1000, launchedAtMs: null, sandboxId: null, endedAtMs: null, outcome: null, error: null }] : [],
    createdAtMs: NOW - 3000,
    updatedAtMs: NOW - 1000,
    endedAtMs: state === "completed" || state === "failed" || state === "cancelled" ? NOW - 100 : null,
    ...extra,
  };
}

const pushed = { branch: "docket/run_000000000000000000000001", sourceRevision: null, patchDigest: "d", intentAtMs: NOW - 100, headSha: "abc", pushedAtMs: NOW - 50, tries: 0, nextTryAtMs: null, lastError: null, pr: null };
const stop = { requestedAtMs: NOW - 10, reason: null, by: "member:t" };
const final = (outcome: "completed" | "failed") => ({
  outcome,
  error: outcome === "failed" ? "tests failed" : null,
  exitCodes: { agent: outcome === "completed" ? 0 : 1 },
  artifact: null,
  costCents: 5,
});

// For each permitted edge: a starting run and the command that drives it.
const EDGES: Record<string, [RunRecord, RunCommand]> = {
  "queued->claimed": [run("queued"), { type: "claim", machineId: M }],
  "queued->publishing": [run("queued", { continuation: "publishing", attempt: 1, publication: pushed }), { type: "publish" }],
  "queued->paused": [run("queued"), { type: "pause", hold: true, reason: "operator hold" }],
  "queued->blocked": [run("queued"), { type: "block", blocker: { summary: "needs a human answer", evidence: [], questions: [], humanAction: "answer the question" } }],
  "queued->cancelled": [run("queued"), { type: "cancel", by: "member:t", reason: null }],
  "claimed->implementing": [run("claimed"), { type: "launched", attempt: 1, machineId: M, sandboxId: "sbx" }],
  "claimed->queued": [run("claimed"), { type: "launch_failed", attempt: 1, machineId: M, error: "no image", jitter: 0.5 }],
  "claimed->failed": [run("claimed", { attempt: 3 }), { type: "launch_failed", attempt: 3, machineId: M, error: "no image", jitter: 0.5 }],
  "claimed->paused": [run("claimed", { continuation: "implementing" }), { type: "checkpoint_unusable", attempt: 1, machineId: M, reason: "the patch does not apply" }],
  "claimed->cancelled": [run("claimed", { stopRequest: stop }), { type: "stopped", attempt: 1, machineId: M, reason: null }],
  "implementing->pausing": [run("implementing"), { type: "pause", hold: false, reason: null }],
  "implementing->blocked": [run("implementing"), { type: "block", blocker: { summary: "question", evidence: [], questions: [], humanAction: "answer the question" } }],
  "implementing->publishing": [run("implementing", { ticketKey: "github:o/r#1" }), { type: "report", attempt: 1, phase: null, lines: [], final: { ...final("completed"), artifact: { patch: "diff", sourceRevision: null, model: null, limitations: [] }, patchDigest: "d" } }],
  "implementing->completed": [run("implementing"), { type: "report", attempt: 1, phase: null, lines: [], final: final("completed") }],
  "implementing->failed": [run("implementing"), { type: "report", attempt: 1, phase: null, lines: [], final: final("failed") }],
  "implementing->cancelled": [run("implementing", { stopRequest: stop }), { type: "stopped", attempt: 1, machineId: M, reason: null }],
  "pausing->paused": [run("pausing"), { type: "quiesced" }],
  "pausing->blocked": [run("pausing"), { type: "block", blocker: { summary: "question", evidence: [], questions: [], humanAction: "answer the question" } }],
  "pausing->failed": [run("pausing"), { type: "report", attempt: 1, phase: null, lines: [], final: final("failed") }],
  "pausing->cancelled": [run("pausing", { stopRequest: stop }), { type: "stopped", attempt: 1, machineId: M, reason: null }],
  "paused->queued": [run("paused"), { type: "resume", by: "operator" }],
  "paused->blocked": [run("paused"), { type: "block", blocker: { summary: "question", evidence: [], questions: [], humanAction: "answer the question" } }],
  "paused->cancelled": [run("paused"), { type: "cancel", by: "member:t", reason: null }],
  "blocked->queued": [run("blocked"), { type: "authorize" }],
  "blocked->cancelled": [run("blocked"), { type: "cancel", by: "member:t", reason: null }],
  "publishing->completed": [run("publishing", { publication: pushed }), { type: "published", pr: { number: 7, url: "https://github.com/o/r/pull/7" } }],
  "publishing->paused": [run("publishing"), { type: "publish_interrupted", reason: "push pending" }],
  "publishing->failed": [run("publishing"), { type: "publish_failed", error: "remote rejected" }],
};

// Every command, to try against every state in search of a refused edge taken anyway.
const ALL_COMMANDS: RunCommand[] = [
  ...new Map(Object.values(EDGES).map(([, c]) => [JSON.stringify(c), c])).values(),
  { type: "lease", attempt: 1, machineId: M },
  { type: "deadline", recoveredAtMs: 0, jitter: 0 },
];

describe("the run state table", () => {
  const permitted = RUN_STATES.flatMap((from) => TRANSITIONS[from].map((to) => `${from}->${to}`));

  it("lists exactly the transitions of DESIGN.md's table", () => {
    expect(permitted.sort()).toEqual(Object.keys(EDGES).sort());
    for (const terminal of ["completed", "failed", "cancelled"] as const) expect(TRANSITIONS[terminal]).toEqual([]);
  });

  for (const edge of permitted) {
    it(`permits ${edge}, driven by a command`, () => {
      const [from, to] = edge.split("->") as [RunState, RunState];
      const [start, command] = EDGES[edge];
      expect(start.state).toBe(from);
      const d = decide(start, command, NOW, DEFAULTS);
      expect(d.ok).toBe(true);
      if (!d.ok) return;
      expect(d.run.state).toBe(to);
      expect(d.hops.map((h) => `${h.from}->${h.to}`)).toEqual([edge]);
      expect(d.run.version).toBe(start.version + 1);
    });
  }

  for (const from of RUN_STATES) {
    for (const to of RUN_STATES) {
      if (canTransition(from, to)) continue;
      it(`refuses ${from}->${to}: no command takes it`, () => {
        expect(canTransition(from, to)).toBe(false);
        for (const command of ALL_COMMANDS) {
          const d = decide(run(from), command, NOW + 10 * 60 * 60 * 1000, DEFAULTS);
          if (!d.ok) continue;
          expect(d.hops.map((h) => `${h.from}->${h.to}`)).not.toContain(`${from}->${to}`);
        }
      });
    }
  }

  it("never changes a terminal run, whatever the command", () => {
    for (const state of ["completed", "failed", "cancelled"] as const) {
      for (const command of ALL_COMMANDS) {
        const d = decide(run(state), command, NOW, DEFAULTS);
        if (d.ok) expect(d.changed).toBe(false);
      }
    }
  });
});

describe("decisions of the dispatch spec, as pure rules", () => {
  it("a pending stop outranks the launch-failure requeue", () => {
    const d = decide(run("claimed", { stopRequest: stop }), { type: "launch_failed", attempt: 1, machineId: M, error: "pull failed", jitter: 0 }, NOW, DEFAULTS);
    expect(d.ok && d.run.state).toBe("cancelled");
  });

  it("a pending stop outranks the spent attempt budget", () => {
    const d = decide(run("claimed", { attempt: 3, stopRequest: stop }), { type: "launch_failed", attempt: 3, machineId: M, error: "pull failed", jitter: 0 }, NOW, DEFAULTS);
    expect(d.ok && d.run.state).toBe("cancelled");
  });

  it("a pending stop outranks a failed final report", () => {
    const d = decide(run("implementing", { stopRequest: stop }), { type: "report", attempt: 1, phase: null, lines: [], final: final("failed") }, NOW, DEFAULTS);
    expect(d.ok && d.run.state).toBe("cancelled");
  });

  it("backoff doubles per attempt, with jitter inside [d/2, d], capped at the maximum", () => {
    const runs = [1, 2, 3].map((attempt) => {
      const d = decide(run("claimed", { attempt }), { type: "launch_failed", attempt, machineId: M, error: "x", jitter: 1 }, NOW, { ...DEFAULTS, attemptBudget: 5 });
      return d.ok ? d.run.notBeforeMs - NOW : -1;
    });
    expect(runs).toEqual([DEFAULTS.backoffBaseMs, DEFAULTS.backoffBaseMs * 2, DEFAULTS.backoffBaseMs * 4]);
    const low = decide(run("claimed"), { type: "launch_failed", attempt: 1, machineId: M, error: "x", jitter: 0 }, NOW, DEFAULTS);
    expect(low.ok && low.run.notBeforeMs - NOW).toBe(DEFAULTS.backoffBaseMs / 2);
    const capped = decide(run("claimed", { attempt: 30 }), { type: "launch_failed", attempt: 30, machineId: M, error: "x", jitter: 1 }, NOW, { ...DEFAULTS, attemptBudget: 40 });
    expect(capped.ok && capped.run.notBeforeMs - NOW).toBe(DEFAULTS.backoffMaxMs);
  });

  it("the reaper never touches a queued run, however old", () => {
    const d = decide(run("queued", { queuedAtMs: 0, notBeforeMs: 0 }), { type: "deadline", recoveredAtMs: 0, jitter: 0 }, NOW * 2, DEFAULTS);
    expect(d.ok && d.changed).toBe(false);
  });

  it("a report bound to an older attempt is refused as stale and changes nothing", () => {
    const start = run("implementing", { attempt: 2 });
    const d = decide(start, { type: "report", attempt: 1, phase: "verifying", lines: ["old"], final: final("failed") }, NOW, DEFAULTS);
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.error.code).toBe("stale_attempt");
  });
});
