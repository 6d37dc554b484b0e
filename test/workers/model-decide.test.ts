// Model-based tests of the pure transition rules (src/run/decide.ts): long random sequences of every
// command the run object knows (also those only the run object itself sends, such as the PR step's
// publish_try and published, which the HTTP model drives only through the alarm) on a virtual clock,
// with DESIGN.md's invariants checked after every decision, and the decisions the HTTP model
// (run-model.ts) covers compared with its predictions.

import fc from "fast-check";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { decide, type DecideConfig } from "../../src/run/decide";
import type { RunCommand, RunRecord } from "../../src/run/types";
import { ERROR_STATUS } from "../../src/protocol/errors";
import { isTerminal, permitted, predict, type Call, type ModelRun } from "./run-model";
import { newQueuedRun } from "../../src/run/new-run";

const RUNS = Number(env.MODEL_RUNS || 1_000) * 10;
const SEED = Number(env.MODEL_SEED || 1);
const MACHINES = ["mch_a", "mch_b", "mch_c"];
const START_MS = 1_800_000_000_000;

type Step = { advanceMs: number; command: (run: RunRecord) => RunCommand };

const machine = fc.constantFrom(...MACHINES);
const attemptRel = fc.constantFrom(0, 0, 0, 0, -1, 1);
const jitter = fc.double({ min: 0, max: 1, noNaN: true });
const reason = fc.constantFrom(null, "operator hold", "a human question");
const at = (run: RunRecord, rel: number) => Math.max(0, run.attempt + rel);
const holderOr = (run: RunRecord, m: string, useHolder: boolean) => (useHolder && run.machineId ? run.machineId : m);

const commandArb: fc.Arbitrary<(run: RunRecord) => RunCommand> = fc.oneof(
  { weight: 6, arbitrary: machine.map((m) => () => ({ type: "claim", machineId: m }) as RunCommand) },
  {
    weight: 5,
    arbitrary: fc.tuple(machine, fc.boolean(), attemptRel, fc.constantFrom("sbx-1", "sbx-2")).map(
      ([m, h, rel, sbx]) => (run: RunRecord) => ({ type: "launched", attempt: at(run, rel), machineId: holderOr(run, m, h), sandboxId: sbx }) as RunCommand,
    ),
  },
  { weight: 3, arbitrary: fc.tuple(machine, fc.boolean(), attemptRel).map(([m, h, rel]) => (run: RunRecord) => ({ type: "lease", attempt: at(run, rel), machineId: holderOr(run, m, h) }) as RunCommand) },
  {
    weight: 3,
    arbitrary: fc.tuple(machine, fc.boolean(), attemptRel, jitter).map(
      ([m, h, rel, j]) => (run: RunRecord) => ({ type: "launch_failed", attempt: at(run, rel), machineId: holderOr(run, m, h), error: "pull failed", jitter: j }) as RunCommand,
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(machine, fc.boolean(), attemptRel, reason).map(
      ([m, h, rel, r]) => (run: RunRecord) => ({ type: "stopped", attempt: at(run, rel), machineId: holderOr(run, m, h), reason: r }) as RunCommand,
    ),
  },
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        attemptRel,
        fc.constantFrom(null, "planning", "verifying"),
        fc.array(fc.constantFrom("a", "b"), { maxLength: 2 }),
        fc.constantFrom(null, "completed", "failed", "blocked"),
        fc.constantFrom<SeqPick>("none", "next", "next", "same", "older"),
      )
      .map(([rel, phase, lines, outcome, seq]) => (run: RunRecord) =>
        ({
          type: "report",
          attempt: at(run, rel),
          seq: reportSeq(run, at(run, rel), seq),
          phase,
          lines,
          final: outcome === null ? null : { outcome, error: outcome === "failed" ? "tests failed" : null, exitCodes: {}, artifact: outcome === "completed" ? { patch: "diff", sourceRevision: null, model: null, limitations: [] } : null, costCents: 3, patchDigest: "sha256-of-diff", blocker: outcome === "blocked" ? { summary: "which database?", evidence: [], questions: ["postgres?"], humanAction: "answer" } : null },
        }) as RunCommand,
      ),
  },
  { weight: 2, arbitrary: reason.map((r) => () => ({ type: "cancel", by: "member:t", reason: r }) as RunCommand) },
  { weight: 4, arbitrary: fc.tuple(fc.constantFrom(0, 0, 0, 1), jitter).map(([outage, j]) => (run: RunRecord) => ({ type: "deadline", recoveredAtMs: outage ? run.updatedAtMs : 0, jitter: j }) as RunCommand) },
  { weight: 2, arbitrary: fc.tuple(fc.boolean(), reason).map(([hold, r]) => () => ({ type: "pause", hold, reason: r }) as RunCommand) },
  { weight: 1, arbitrary: fc.constant(() => ({ type: "quiesced" }) as RunCommand) },
  { weight: 2, arbitrary: fc.constant(() => ({ type: "resume", by: "operator" }) as RunCommand) },
  { weight: 1, arbitrary: fc.constant(() => ({ type: "block", blocker: { summary: "which database?", evidence: [], questions: [], humanAction: "answer the question" } }) as RunCommand) },
  { weight: 1, arbitrary: fc.constant(() => ({ type: "authorize" }) as RunCommand) },
  { weight: 3, arbitrary: fc.constant(() => ({ type: "publish" }) as RunCommand) },
  { weight: 1, arbitrary: fc.constant(() => ({ type: "published", pr: { number: 7, url: "https://github.com/o/r/pull/7" } }) as RunCommand) },
  { weight: 1, arbitrary: fc.constant(() => ({ type: "publish_interrupted", reason: "push pending" }) as RunCommand) },
  { weight: 1, arbitrary: fc.constant(() => ({ type: "publish_failed", error: "remote rejected" }) as RunCommand) },
);

/** Time between two commands: often nothing, sometimes up to the silence deadline and past it. */
const advanceArb = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 0, max: 700_000 }));
const stepArb: fc.Arbitrary<Step> = fc.record({ advanceMs: advanceArb, command: commandArb });

const configArb: fc.Arbitrary<DecideConfig> = fc.record({
  leaseTtlMs: fc.constantFrom(60_000, 30_000),
  launchDeadlineMs: fc.constantFrom(120_000, 45_000),
  daemonSilenceMs: fc.constantFrom(600_000, 90_000),
  backoffBaseMs: fc.constantFrom(1_000, 5_000),
  backoffMaxMs: fc.constantFrom(8_000, 300_000),
  attemptBudget: fc.integer({ min: 1, max: 4 }),
  publicationTriesMax: fc.integer({ min: 1, max: 3 }),
  runStateHistoryMax: fc.constantFrom(100, 2),
});

function newRecord(): RunRecord {
  return newQueuedRun(
    {
      id: "run_000000000000000000000001",
      orgId: "org_a",
      brief: "b",
      repository: null,
      labels: [],
      priority: 0,
      launch: { protocol: "process", command: ["true"], image: null, env: {} },
      callbackUrl: null,
      metadata: {},
      createdAtMs: START_MS,
    },
    START_MS,
  );
}

type SeqPick = "none" | "next" | "same" | "older";

/** A report's seq relative to the last one the attempt accepted: a new one, a retry, a stale one, or none (an older daemon). */
function reportSeq(run: RunRecord, attempt: number, pick: SeqPick): number | undefined {
  if (pick === "none") return undefined;
  const last = run.lastReportSeq?.attempt === attempt ? run.lastReportSeq.seq : 0;
  if (pick === "next") return last + 1;
  return Math.max(1, pick === "same" ? last : last - 1);
}

/** The HTTP model's view of a run record, for the states it covers (an autopilot run's publication too). */
function asModel(run: RunRecord): ModelRun | null {
  const covered = ["queued", "claimed", "implementing", "completed", "failed", "cancelled", ...(run.ticketKey ? ["publishing"] : [])];
  if (!covered.includes(run.state)) return null;
  if (run.hold || run.continuation !== null) return null;
  const publication = run.publication ? (run.publication.headSha === null ? "intent" : "pushed") : null;
  return {
    ticket: !!run.ticketKey,
    publication,
    state: run.state,
    attempt: run.attempt,
    holder: run.machineId,
    sandbox: run.sandboxId,
    phase: run.phase,
    stop: run.stopRequest !== null,
    leaseAt: run.leaseExpiresAtMs,
    launchDeadlineAt: run.launchDeadlineAtMs,
    launchedAt: run.launchedAtMs,
    lastReportAt: run.lastReportAtMs,
    notBefore: run.notBeforeMs,
    lastReportSeq: run.lastReportSeq ?? null,
  };
}

/** The HTTP model's call for a command it covers, or null. */
function asCall(command: RunCommand, run: RunRecord): Call | null {
  switch (command.type) {
    case "claim":
      return { kind: "claim", machine: command.machineId };
    case "launched":
      return { kind: "launched", machine: command.machineId, attempt: command.attempt, sandbox: command.sandboxId };
    case "lease":
    case "launch_failed":
    case "stopped":
      return { kind: command.type, machine: command.machineId, attempt: command.attempt };
    case "report": {
      // Over HTTP a report names its attempt by its token; an attempt that never was has no token.
      if (command.attempt < 1 || command.attempt > run.attempt) return null;
      const report = command.final ? command.final.outcome : command.lines.length > 0 ? "lines" : command.phase ? "phase" : "empty";
      return { kind: "report", tokenAttempt: command.attempt, token: "", report, phase: command.phase, ...(command.seq != null ? { seq: command.seq } : {}) };
    }
    case "cancel":
      return { kind: "cancel" };
    case "authorize":
      return { kind: "authorize" };
    case "deadline":
      // Over HTTP the alarm also takes a pushed publication's PR step, which decide() leaves to publish_try and published.
      if (run.publication?.headSha) return null;
      return command.recoveredAtMs === 0 ? { kind: "alarm", ageMs: 0 } : null;
    case "pushed": {
      // The HTTP model's pushes all report one head: a recorded push is compared only with that head again.
      if (run.publication?.headSha && run.publication.headSha !== command.headSha) return null;
      return { kind: "pushed", machine: command.machineId, attempt: command.attempt, branch: command.branch === `docket/${run.id}` ? "own" : "other", moved: false };
    }
    default:
      return null;
  }
}

function fail(what: string, trace: string[], detail: unknown = ""): never {
  throw new Error([`invariant broken: ${what}`, detail === "" ? "" : `detail: ${JSON.stringify(detail)}`, "trace:", ...trace.map((t, i) => `  ${i}. ${t}`)].filter(Boolean).join("\n"));
}

/** What the sequences reached: states, refusal codes and comparisons with the HTTP model. */
const reached = new Map<string, number>();
const count = (k: string) => reached.set(k, (reached.get(k) ?? 0) + 1);

function runSequence(config: DecideConfig, steps: Step[], ticketKey: string | null = null): void {
  // An admitted run names its ticket and its project (src/autopilot/admission.ts, runFor).
  let run = ticketKey ? { ...newRecord(), ticketKey, metadata: { autopilot_project: "apj_000000000000000000000001" } } : newRecord();
  let now = START_MS;
  const trace: string[] = [];
  const grants: string[] = [];
  for (const step of steps) {
    now += step.advanceMs;
    const command = step.command(run);
    const before = run;
    let d: ReturnType<typeof decide>;
    try {
      d = decide(before, command, now, config);
    } catch (err) {
      fail(`decide throws on ${command.type}: ${String(err)}`, trace);
    }
    count(d.ok ? `state ${d.run.state}` : `refused ${d.error.code}`);
    trace.push(`+${step.advanceMs}ms ${JSON.stringify(command)} → ${d.ok ? `${d.run.state} a${d.run.attempt}${d.run.stopRequest ? " stop" : ""}` : d.error.code}`);

    // Compared with the HTTP model where it applies (exact time: t0 = t1 = now).
    const m = asModel(before);
    const c = asCall(command, before);
    if (m && c) {
      const expected = predict(m, c, now, now, config);
      const got = d.ok
        ? { status: command.type === "cancel" && d.run.state !== "cancelled" ? 202 : 200, code: null as string | null, state: d.run.state }
        : { status: ERROR_STATUS[d.error.code], code: d.error.code as string | null, state: before.state };
      const ok = expected.some((o) =>
        c.kind === "claim"
          ? (o.status === 200) === d.ok && o.next.state === got.state
          : o.status === got.status && o.code === got.code && o.next.state === got.state && o.next.attempt === (d.ok ? d.run.attempt : before.attempt),
      );
      if (!ok) fail("decide() agrees with the HTTP model", trace, { expected: expected.map((o) => `${o.status} ${o.code} ${o.next.state} (${o.why})`), got });
      count(m.publication ? "publication compared with the HTTP model" : "compared with the HTTP model");
    }

    if (!d.ok) {
      if (!(d.error.code in ERROR_STATUS)) fail("a refusal has a documented code", trace, d.error);
      if (command.type !== "claim" && "attempt" in command && command.attempt < before.attempt && !isTerminal(before.state) && d.error.code !== "stale_attempt") {
        fail("a call bound to an older attempt is refused as stale", trace, d.error);
      }
      continue;
    }
    const next = d.run;
    if (isTerminal(before.state) && d.changed) fail("a terminal run never changes", trace);
    if (!d.changed && JSON.stringify(next) !== JSON.stringify(before)) fail("an unchanged decision leaves the run as it was", trace);
    if ("attempt" in command && command.attempt < before.attempt && d.changed) fail("a call bound to attempt N-1 never changes attempt N", trace);
    // Every hop permitted by DESIGN.md's table, chained from the state before to the state after.
    let state = before.state;
    for (const hop of d.hops) {
      if (hop.from !== state || !permitted(hop.from, hop.to)) fail(`the table permits ${hop.from} -> ${hop.to}`, trace);
      state = hop.to;
    }
    if (state !== next.state) fail("the hops end in the run's state", trace);
    const stateEvents = d.events.filter((e) => e.type === "run.state");
    if (stateEvents.length !== d.hops.length) fail("one run.state event per hop", trace);
    if (next.version < before.version + d.hops.length) fail("the version grows with every hop", trace);
    // Attempts: one per claim, each step held by the machine that claimed it.
    const claimed = command.type === "claim";
    if (next.attempt !== before.attempt + (claimed ? 1 : 0)) fail("the attempt grows by one per claim and only then", trace);
    if (claimed) grants.push(command.machineId);
    if (next.steps.length !== next.attempt || next.steps.some((s, i) => s.attempt !== i + 1 || s.machineId !== grants[i])) {
      fail("one step per attempt, held by the machine that claimed it", trace, next.steps);
    }
    // A pending stop outranks every requeue and failure path, and always ends the run cancelled.
    if (before.stopRequest !== null) {
      if (next.stopRequest === null) fail("a stop request is never dropped", trace);
      if (next.state !== before.state && !["cancelled", "implementing", "pausing"].includes(next.state)) {
        fail(`once a cancel was accepted the run is never ${next.state}`, trace, { from: before.state, to: next.state });
      }
      if (next.attempt !== before.attempt) fail("a run with a stop request is never claimed again", trace);
    }
    if (next.state === "queued" && next.stopRequest !== null) fail("a run with a stop request is never queued", trace);
    if (next.state === "queued" && before.state !== "queued") {
      const leftOver = { machineId: next.machineId, sandboxId: next.sandboxId, leaseExpiresAtMs: next.leaseExpiresAtMs, launchDeadlineAtMs: next.launchDeadlineAtMs };
      if (Object.values(leftOver).some((v) => v !== null)) fail("a requeued run keeps nothing of the attempt before", trace, leftOver);
    }
    if (before.state === "queued" && next.state !== "queued" && command.type === "deadline") fail("a queued run is never reaped", trace);
    checkPublication(before, next, d.events, config, trace);
    run = next;
  }
  // Whatever happened, a run with a stop request that ended, ended cancelled.
  if (isTerminal(run.state) && run.stopRequest !== null && run.state !== "cancelled") fail("a run with a stop request ends cancelled", trace);
}

describe("the transition rules against the model (pure, many sequences)", () => {
  it(`keeps every invariant over ${RUNS} random sequences of up to 40 commands (seed ${SEED})`, () => {
    fc.assert(
      fc.property(configArb, fc.array(stepArb, { minLength: 1, maxLength: 40, size: "max" }), (config, steps) => runSequence(config, steps)),
      { numRuns: RUNS, seed: SEED },
    );
    console.log(`decide model: ${[...reached.entries()].sort().map(([k, n]) => `${k} ×${n}`).join(", ")}`);
  }, 300_000);
});

/** The runner's and Docket's publication commands, with the right and wrong machine, attempt and branch. */
const publicationCommandArb: fc.Arbitrary<(run: RunRecord) => RunCommand> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(machine, fc.boolean(), attemptRel, fc.boolean(), fc.constantFrom("a".repeat(40), "b".repeat(40))).map(
      ([m, h, rel, rightBranch, sha]) => (run: RunRecord) =>
        ({ type: "pushed", attempt: at(run, rel), machineId: holderOr(run, m, h), branch: rightBranch ? `docket/${run.id}` : "main", headSha: sha }) as RunCommand,
    ),
  },
  { weight: 3, arbitrary: fc.constantFrom(null, "GitHub answered 502").map((error) => (run: RunRecord) => ({ type: "publish_try", error, retryAtMs: run.updatedAtMs + 30_000 }) as RunCommand) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 9 }).map((n) => () => ({ type: "published", pr: { number: n, url: `https://github.com/o/r/pull/${n}` } }) as RunCommand) },
);

/**
 * Publication's invariants (run-lifecycle.md, "Completion and recovery"): publishing starts only with
 * its intent stored in the same decision, a push is recorded once, the run completes from publishing
 * only with its PR stored (and the two tracker deliveries), and failed tries are bounded.
 */
function checkPublication(before: RunRecord, next: RunRecord, events: { type: string }[], config: DecideConfig, trace: string[]): void {
  const p = next.publication ?? null;
  if (next.state === "publishing" && (!p || p.branch !== `docket/${next.id}` || !p.patchDigest)) fail("a publishing run has its intent stored", trace, p);
  if (before.state === "implementing" && next.state === "publishing" && before.publication) fail("the intent is made by the outcome that starts publishing", trace);
  if (before.publication?.headSha && p?.headSha !== before.publication.headSha) fail("a recorded push is never replaced", trace, { before: before.publication, after: p });
  if (before.state === "publishing" && next.state === "completed" && !p?.pr) fail("a publication completes only with its PR stored", trace, p);
  if (before.state === "publishing" && next.state !== "publishing") count(`publication ended ${next.state}`);
  if (!before.publication?.headSha && p?.headSha) count("publication pushed");
  if (before.publication?.pr && p?.pr?.number !== before.publication.pr.number) fail("a stored PR is never replaced", trace);
  // A blocker's comment is the blocked transition's own delivery (checked with the blockers).
  const kinds = events.filter((e) => e.type === "run.tracker_delivery").map((e) => (e as { data?: { kind?: string } }).data?.kind);
  const deliveries = kinds.filter((k) => k === "review_label" || k === "pr_comment").length;
  if (deliveries !== (before.state === "publishing" && next.state === "completed" ? 2 : 0)) fail("the publication's tracker deliveries go out with the published transition only", trace, { deliveries });
  // A failure's comment is the failed transition's own delivery, once.
  const failures = kinds.filter((k) => k === "failure_comment").length;
  if (failures !== (next.ticketKey && before.state !== "failed" && next.state === "failed" ? 1 : 0)) fail("an autopilot run's failure is told on its issue with the failed transition only", trace, { failures });
  if (p && p.tries > config.publicationTriesMax) fail("failed PR tries are bounded by PUBLICATION_TRIES_MAX", trace, p);
  if (p && p.tries === config.publicationTriesMax && next.state === "publishing") fail("the last failed try ends the publication", trace, p);
}

describe("publication commands against the transition table (pure, many sequences)", () => {
  it(`keeps every invariant on autopilot runs over ${RUNS / 2} random sequences (seed ${SEED})`, () => {
    const stepWithPublication = fc.record({ advanceMs: advanceArb, command: fc.oneof({ weight: 3, arbitrary: commandArb }, { weight: 2, arbitrary: publicationCommandArb }) });
    fc.assert(
      fc.property(configArb, fc.array(stepWithPublication, { minLength: 1, maxLength: 40, size: "max" }), (config, steps) => runSequence(config, steps, "github:o/r#1")),
      { numRuns: RUNS / 2, seed: SEED },
    );
    console.log(`decide model with publication: ${[...reached.entries()].filter(([k]) => k.startsWith("publication")).sort().map(([k, n]) => `${k} ×${n}`).join(", ")}`);
    for (const k of ["publication pushed", "publication ended completed", "publication ended paused", "publication ended failed", "publication compared with the HTTP model"]) {
      expect(reached.get(k), k).toBeGreaterThan(0);
    }
  }, 300_000);
});

describe("a pending stop outranks the paths no route drives yet", () => {
  const config: DecideConfig = { leaseTtlMs: 60_000, launchDeadlineMs: 120_000, daemonSilenceMs: 600_000, backoffBaseMs: 1_000, backoffMaxMs: 8_000, attemptBudget: 3, publicationTriesMax: 3, runStateHistoryMax: 100 };
  const stopped = (): RunRecord => {
    let run = newRecord();
    for (const command of [
      { type: "claim", machineId: "mch_a" },
      { type: "launched", attempt: 1, machineId: "mch_a", sandboxId: "sbx-1" },
      { type: "cancel", by: "member:t", reason: null },
    ] as RunCommand[]) {
      const d = decide(run, command, START_MS, config);
      if (!d.ok) throw new Error(d.error.message);
      run = d.run;
    }
    return run;
  };

  it("a blocker on a run with a pending stop ends it cancelled, never blocked (and never requeued by an authorization)", () => {
    const d = decide(stopped(), { type: "block", blocker: { summary: "which database?", evidence: [], questions: [], humanAction: "answer the question" } }, START_MS, config);
    expect(d.ok && d.run.state).toBe("cancelled");
  });

  const outcome = (run: RunRecord): RunCommand => ({
    type: "report",
    attempt: run.attempt,
    phase: null,
    lines: [],
    final: { outcome: "completed", error: null, exitCodes: {}, artifact: { patch: "diff", sourceRevision: null, model: null, limitations: [] }, costCents: 1, patchDigest: "d" },
  });

  it("an accepted outcome on a run with a pending stop ends it cancelled, never publishing", () => {
    const run = { ...stopped(), ticketKey: "github:o/r#1" };
    const d = decide(run, outcome(run), START_MS, config);
    expect(d.ok && d.run.state).toBe("cancelled");
  });

  it("a publishing run refuses a cancel: no accepted stop could end it cancelled from there", () => {
    const run = { ...newRecordLaunched(config), ticketKey: "github:o/r#1" };
    const publishing = decide(run, outcome(run), START_MS, config);
    if (!publishing.ok) throw new Error(publishing.error.message);
    const d = decide(publishing.run, { type: "cancel", by: "member:t", reason: null }, START_MS, config);
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.error.code).toBe("invalid_transition");
  });
});

function newRecordLaunched(config: DecideConfig): RunRecord {
  let run = newRecord();
  for (const command of [
    { type: "claim", machineId: "mch_a" },
    { type: "launched", attempt: 1, machineId: "mch_a", sandboxId: "sbx-1" },
  ] as RunCommand[]) {
    const d = decide(run, command, START_MS, config);
    if (!d.ok) throw new Error(d.error.message);
    run = d.run;
  }
  return run;
}

