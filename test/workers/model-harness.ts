// Model-based tests of the run objects through the HTTP API: random sequences of dispatch, claims
// by several machines, launched, lease refreshes, reports from the current and from older attempts,
// launch failures, stopped, cancels, alarms at random times and duplicate deliveries, pauses,
// checkpoints and resumes, each checked against a simple model (run-model.ts) and against DESIGN.md's
// invariants after every step. A share of the sequences drive an autopilot run (admitted from a
// ticket) through publication: its outcome goes publishing, then push credentials, pushes, the
// alarm's PR step, pauses, resumes and refused final reports; GitHub is the one stand-in
// (autopilot-fakes.ts: the tracker and FakeHost).
//
// The sequences are shared out over the files model-1.test.ts … model-5.test.ts (lanes): every
// sequence makes a new run object, and the test pool makes each new Durable Object of a file slower
// to create than the last (cloudflare/workers-sdk#15092), so a file keeps to a few hundred.
//
// MODEL_RUNS=<n> runs n sequences in all (default 600, 120 a lane, with a new seed every test run),
// MODEL_SEED=<n> replays the sequences of a printed seed, MODEL_STEPS=<n> allows longer sequences
// (vitest.config.ts passes them to the Workers runtime). A long run goes in rounds of 1,000 with a
// new seed each: MODEL_RUNS=20000 node scripts/model-soak.mjs.

import fc from "fast-check";
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import { isRefusal } from "../../src/errors";
import { ERROR_STATUS, type ErrorCode } from "../../src/protocol/errors";
import type { RunRecord } from "../../src/run/types";
import type { RunView } from "../../src/run/view";
import { admitReadyIssue, createProject, FakeHost, installRealAutopilotWithTracker, type RealProject } from "./autopilot-fakes";
import { callDirect as call } from "./direct";
import { ageRun, CLI_VERSION, createOrg, editStoredRun, registerRunner, runAlarm, runBody, runStub, schedulerOf } from "./helpers";
import { grantCredit } from "./builds-helpers";
import { audit } from "../../src/ledger/ledger";
import { SLOT_STATES } from "../../src/autopilot/scheduler-gates";
import { muteTransitionLogs } from "./quiet";
import {
  backoffRange,
  describeRun,
  isTerminal,
  newRun,
  permitted,
  predict,
  reapAt,
  withBackground,
  type Call,
  type ModelRun,
  type Outcome,
  type ReportKind,
  type Timing,
} from "./run-model";

/** How often each call got each answer: which paths the random sequences reached. */
const answers = new Map<string, number>();
/** The files that share the sequences out. */
export const LANES = 5;
const RUNS = Number(env.MODEL_RUNS || 600);
const SEED = Number(env.MODEL_SEED || 1);
const MAX_STEPS = Number(env.MODEL_STEPS || 10);
/** A deadline closer than this to now may pass between two steps: the harness lets it pass first. */
const GUARD_MS = 5_000;

const config = loadConfig(env);
const timing: Timing = config;

type Json = Record<string, any>;
type StoredEvent = { seq: number; type: string; at_ms: number; data: Json };

// ---- generated steps ----------------------------------------------------------------------------

type MachinePick = "holder" | 0 | 1 | 2;
type Step =
  | { kind: "claim"; machine: 0 | 1 | 2 }
  /** A claim that finds the run's queue row stale (queued while the run is not): its run object refuses it. */
  | { kind: "claim_stale"; machine: 0 | 1 | 2 }
  | { kind: "launched"; machine: MachinePick; attempt: -1 | 0 | 1; sandbox: 0 | 1 }
  | { kind: "lease" | "launch_failed" | "stopped"; machine: MachinePick; attempt: -1 | 0 | 1 }
  | { kind: "report"; token: "current" | "older" | "made_up" | "foreign"; report: ReportKind; phase: string }
  | { kind: "cancel" }
  | { kind: "alarm"; ageMs: number }
  /** The alarm fires just after the run's next deadline (its backoff, lease, launch or silence deadline). */
  | { kind: "alarm_due" }
  | { kind: "repeat" }
  | { kind: "dispatch_again"; samePayload: boolean }
  | { kind: "redeliver" }
  | { kind: "authorize" }
  | PauseStep
  | PublishStep;

/** The runner's publication calls: its push credential, and its push (of another branch, or with the code host's head moved by someone else). */
type PublishStep =
  | { kind: "push_credential"; machine: MachinePick; attempt: -1 | 0 | 1 }
  | { kind: "pushed"; machine: MachinePick; attempt: -1 | 0 | 1; branch: "own" | "other"; moved: boolean; hostDown: boolean };

/** Pause and resume: the operator's calls, the daemon's checkpoint (a token, and a path attempt off by `pathRel`), the runner's unusable checkpoint. */
type PauseStep =
  | { kind: "pause" }
  | { kind: "resume" }
  | { kind: "checkpoint"; token: "current" | "older" | "made_up"; pathRel: 0 | 1 }
  | { kind: "checkpoint_unusable"; machine: MachinePick; attempt: -1 | 0 | 1 };

const machineIndex = fc.constantFrom<0 | 1 | 2>(0, 1, 2);
const machinePick: fc.Arbitrary<MachinePick> = fc.constantFrom<MachinePick>("holder", "holder", "holder", 0, 1, 2);
const attemptPick = fc.constantFrom<-1 | 0 | 1>(0, 0, 0, 0, 0, -1, 1);
/** Alarms at random times, with extra weight just around the lease, launch and silence deadlines. */
const ageMs = fc.oneof(
  fc.integer({ min: 0, max: 10_000 }),
  fc.constantFrom(55_000, 65_000, 115_000, 125_000, 595_000, 605_000, 700_000),
  fc.integer({ min: 0, max: 700_000 }),
);

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("claim" as const), machine: machineIndex }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("launched" as const), machine: machinePick, attempt: attemptPick, sandbox: fc.constantFrom<0 | 1>(0, 0, 1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("lease" as const), machine: machinePick, attempt: attemptPick }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("launch_failed" as const), machine: machinePick, attempt: attemptPick }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("stopped" as const), machine: machinePick, attempt: attemptPick }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("report" as const),
      token: fc.constantFrom("current", "current", "current", "current", "older", "older", "made_up", "foreign") as fc.Arbitrary<"current" | "older" | "made_up" | "foreign">,
      report: fc.constantFrom<ReportKind>("phase", "lines", "empty", "completed", "failed", "blocked"),
      phase: fc.constantFrom("planning", "implementing", "verifying"),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "cancel" as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("alarm" as const), ageMs }) },
  { weight: 2, arbitrary: fc.constant({ kind: "alarm_due" as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: "repeat" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("dispatch_again" as const), samePayload: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "redeliver" as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: "authorize" as const }) },
  { weight: 4, arbitrary: pauseStepArb() },
);

function pauseStepArb(): fc.Arbitrary<Step> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<Step>({ kind: "pause" }) },
    { weight: 3, arbitrary: fc.constant<Step>({ kind: "resume" }) },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant("checkpoint" as const),
        token: fc.constantFrom<"current" | "older" | "made_up">("current", "current", "current", "older", "made_up"),
        pathRel: fc.constantFrom<0 | 1>(0, 0, 0, 1),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("checkpoint_unusable" as const), machine: machinePick, attempt: attemptPick }) },
  );
}

function publishStepArb(): fc.Arbitrary<Step> {
  return fc.oneof(
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("push_credential" as const), machine: machinePick, attempt: attemptPick }) },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant("pushed" as const),
        machine: machinePick,
        attempt: attemptPick,
        branch: fc.constantFrom<"own" | "other">("own", "own", "own", "own", "other"),
        moved: fc.constantFrom(false, false, false, false, true),
        hostDown: fc.constantFrom(false, false, false, true),
      }),
    },
  );
}

const claimArb = fc.record({ kind: fc.constant("claim" as const), machine: machineIndex });
/** The current attempt's daemon reports an end: a publishing run refuses it. */
const finalReportArb: fc.Arbitrary<Step> = fc.record({
  kind: fc.constant("report" as const),
  token: fc.constant("current" as const),
  report: fc.constantFrom<ReportKind>("completed", "failed", "blocked"),
  phase: fc.constant("verifying"),
});

/** A sequence: its steps, on a plain run or on an autopilot run that publishes. */
type Plan = { publishes: boolean; steps: Step[] };
const plain = (steps: Step[]): Plan => ({ publishes: false, steps });

/**
 * Most sequences start with a claim, so that the rest has an attempt to work on; a third start
 * from a second attempt (the first one failed to launch or lapsed), so that older attempts and
 * their machines and tokens are around to call in.
 */
const planArb: fc.Arbitrary<Plan> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.option(claimArb, { freq: 5 }), fc.array(stepArb, { minLength: 1, maxLength: MAX_STEPS - 1 }))
      .map(([first, rest]) => plain(first ? [first, ...rest] : rest)),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        claimArb,
        fc.constantFrom<Step>({ kind: "launch_failed", machine: "holder", attempt: 0 }, { kind: "alarm_due" }),
        claimArb,
        fc.array(stepArb, { minLength: 1, maxLength: Math.max(1, MAX_STEPS - 4) }),
      )
      .map(([first, end, again, rest]) => plain([first, end, { kind: "alarm_due" } as Step, again, ...rest])),
  },
  // A run paused while it executes, so that checkpoints, resumes and continuations are reached.
  {
    weight: 1,
    arbitrary: fc
      .tuple(claimArb, fc.array(fc.oneof({ weight: 2, arbitrary: pauseStepArb() }, { weight: 3, arbitrary: stepArb }), { minLength: 1, maxLength: Math.max(1, MAX_STEPS - 3) }))
      .map(([first, rest]) => plain([first, { kind: "launched", machine: "holder", attempt: 0, sandbox: 0 } as Step, { kind: "pause" } as Step, ...rest])),
  },
  // An autopilot run whose successful outcome goes publishing, so that pushes, the PR step, pauses
  // and resumes of a publication and the final reports it refuses are reached; a third are paused and
  // resumed before the push, so that a push-only continuation is claimed (attempt 2).
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.boolean(),
        claimArb,
        fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: claimArb }),
        fc.array(publishingStepArb(), { minLength: 1, maxLength: Math.max(1, MAX_STEPS - 6) }),
      )
      .map(([refusedFirst, first, again, rest]) => ({
        publishes: true,
        steps: [
          // Half are paused before their first claim, and a claim through a stale queue row is refused
          // by the run object before the resume: the claim after it holds the reservation again.
          ...(refusedFirst ? ([{ kind: "pause" }, { kind: "claim_stale", machine: first.machine }, { kind: "resume" }] as Step[]) : []),
          first,
          { kind: "launched", machine: "holder", attempt: 0, sandbox: 0 } as Step,
          { kind: "report", token: "current", report: "completed", phase: "verifying" } as Step,
          ...(again ? [{ kind: "pause" } as Step, { kind: "resume" } as Step, again] : []),
          ...rest,
        ],
      })),
  },
);

/** The steps of a publishing sequence: publication calls, final reports, pauses and resumes, and all the others. */
function publishingStepArb(): fc.Arbitrary<Step> {
  return fc.oneof({ weight: 3, arbitrary: publishStepArb() }, { weight: 1, arbitrary: finalReportArb }, { weight: 1, arbitrary: pauseStepArb() }, { weight: 3, arbitrary: stepArb });
}

// ---- the organization every sequence runs in ----------------------------------------------------

let orgId = "";
let admin = "";
let machines: { machineId: string; token: string }[] = [];
/** A valid run-attempt token of an earlier sequence's run: never valid for this one. */
let foreignToken: string | null = null;
/** The autopilot project publishing runs are admitted by, its issues, and its code host (a stand-in for GitHub). */
const autopilot = installRealAutopilotWithTracker();
const host = new FakeHost();
autopilot.deps.publisher = () => host;
let project: RealProject | null = null;
let nextIssue = 1_000;
/** The project's per-run model-spend reservation: every publishing sequence's run is behind a budget gate. */
const PER_RUN_CENTS = 100;
/** The commit every push reports; a code host branch `moved` by someone else is at another. */
const PUSHED_SHA = "a".repeat(40);
const COMPLETED_PATCH = "diff --git a/x b/x\n+y\n";

async function setUp(): Promise<void> {
  muteTransitionLogs();
  ({ orgId, admin } = await createOrg("model"));
  machines = [];
  for (const name of ["box-a", "box-b", "box-c"]) machines.push(await registerRunner(admin, { name }));
  project = await createProject(admin);
  await grantCredit(admin, 100_000_000);
  const budget = await call("PATCH", `/v1/autopilot/projects/${project.id}/scheduler`, { token: admin, body: { budget: { limit_cents: 100_000_000, per_run_cents: PER_RUN_CENTS } } });
  expect(budget.status, JSON.stringify(budget.body)).toBe(200);
}

// ---- one sequence against one new run -----------------------------------------------------------

class Sequence {
  model!: ModelRun;
  view!: RunView;
  events: StoredEvent[] = [];
  /** The machine granted each attempt, in order: two machines never hold the same attempt. */
  grants: string[] = [];
  /** The run-attempt token of each attempt. */
  tokens: string[] = [];
  cancelAccepted = false;
  last: Call | null = null;
  /** The seq of the last report materialized: increasing across the run, so within each attempt too. */
  reportSeq = 0;
  /** When the previous step's reads ended: a real alarm may fire between then and the next step. */
  lastStepEndMs = 0;
  readonly history: string[] = [];
  runId = "";
  readonly key = `model-${crypto.randomUUID()}`;
  readonly body = runBody({ brief: `model run ${this.key}` });

  /** `publishes`: the run is admitted from a ticket of the autopilot project, so a completed outcome publishes. */
  constructor(readonly publishes: boolean) {}

  async dispatch(): Promise<void> {
    const t0 = Date.now();
    if (this.publishes) {
      this.runId = await admitReadyIssue(autopilot, project!.id, nextIssue++);
      this.history.push(`admitted from issue ${nextIssue - 1} → ${this.runId}`);
    } else {
      const res = await call("POST", "/v1/runs", { token: admin, body: this.body, headers: { "Idempotency-Key": this.key } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      this.runId = res.body.id;
      this.history.push(`dispatch → 201 ${this.runId}`);
    }
    this.view = await this.read();
    this.model = { ...newRun(this.view.not_before_ms), ticket: this.publishes };
    this.events = await this.readEvents(0);
    this.ensure(this.view.state === "queued" && this.view.attempt === 0 && this.view.steps.length === 0, "a new run is queued at attempt 0");
    this.ensure(this.view.not_before_ms >= t0 && this.view.not_before_ms <= Date.now(), "a new run is claimable at once");
    this.ensure(this.events.length === 1 && this.events[0].seq === 1 && this.events[0].type === "run.created", "the first event is run.created with seq 1");
  }

  resolve(step: Step): Call {
    const m = this.model;
    const machineOf = (pick: MachinePick) =>
      pick === "holder" ? (m.holder ?? this.grants[this.grants.length - 1] ?? machines[0].machineId) : machines[pick].machineId;
    const attemptOf = (rel: -1 | 0 | 1) => Math.max(1, m.attempt + rel);
    switch (step.kind) {
      case "claim":
      case "claim_stale":
        return { kind: "claim", machine: machines[step.machine].machineId, stale: step.kind === "claim_stale" };
      case "launched": {
        const attempt = attemptOf(step.attempt);
        return { kind: "launched", machine: machineOf(step.machine), attempt, sandbox: step.sandbox === 0 ? `sbx-${attempt}` : "sbx-other" };
      }
      case "lease":
      case "launch_failed":
      case "stopped":
        return { kind: step.kind, machine: machineOf(step.machine), attempt: attemptOf(step.attempt) };
      case "report": {
        let tokenAttempt: number | null = null;
        if (step.token === "current" && m.attempt >= 1) tokenAttempt = m.attempt;
        if (step.token === "older" && m.attempt >= 2) tokenAttempt = m.attempt - 1;
        if (step.token === "older" && m.attempt === 1) tokenAttempt = 1;
        let token = tokenAttempt === null ? `dkt_a_${"0".repeat(56)}${String(this.history.length).padStart(8, "0")}` : this.tokens[tokenAttempt - 1];
        if (step.token === "foreign" && foreignToken) token = foreignToken;
        const phase = step.report === "phase" ? step.phase : step.report === "completed" ? "verifying" : null;
        // Reports are numbered as a daemon numbers them; a `repeat` step sends one again with its seq.
        this.reportSeq += 1;
        return { kind: "report", tokenAttempt, token, report: step.report, phase, seq: this.reportSeq };
      }
      case "alarm_due": {
        const next = m.state === "queued" ? m.notBefore : (reapAt(m, timing) ?? Date.now());
        return { kind: "alarm", ageMs: Math.max(0, next - Date.now()) + 1_000 };
      }
      case "checkpoint": {
        const tokenAttempt = step.token === "current" && m.attempt >= 1 ? m.attempt : step.token === "older" && m.attempt >= 1 ? Math.max(1, m.attempt - 1) : null;
        const token = tokenAttempt === null ? `dkt_a_${"0".repeat(56)}${String(this.history.length).padStart(8, "0")}` : this.tokens[tokenAttempt - 1];
        return { kind: "checkpoint", tokenAttempt, token, attempt: Math.max(1, (tokenAttempt ?? m.attempt) + step.pathRel) };
      }
      case "checkpoint_unusable":
      case "push_credential":
        return { kind: step.kind, machine: machineOf(step.machine), attempt: attemptOf(step.attempt) };
      case "pushed":
        return { kind: "pushed", machine: machineOf(step.machine), attempt: attemptOf(step.attempt), branch: step.branch, moved: step.moved, hostDown: step.hostDown };
      case "dispatch_again":
        // An admitted run has no dispatch of its own to send again: its events are published again instead.
        return this.publishes ? { kind: "redeliver" } : step;
      case "repeat":
        // The previous call delivered again; an alarm fires again without time moving on.
        if (!this.last) return { kind: "cancel" };
        return this.last.kind === "alarm" ? { kind: "alarm", ageMs: 0 } : this.last;
      default:
        return step;
    }
  }

  async send(c: Call): Promise<{ status: number; body: Json; t0: number }> {
    const attemptPath = (what: string, attempt: number) => `/v1/runs/${this.runId}/attempts/${attempt}/${what}`;
    const machineToken = (id: string) => machines.find((x) => x.machineId === id)!.token;
    const t0 = Date.now();
    switch (c.kind) {
      case "claim": {
        if (c.stale) await this.staleQueueRow();
        const res = await call("POST", "/v1/runners/claim", { token: machineToken(c.machine), body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: 0 } });
        return { ...res, t0 };
      }
      case "launched":
        return { ...(await call("POST", attemptPath("launched", c.attempt), { token: machineToken(c.machine), body: { sandbox_id: c.sandbox } })), t0 };
      case "lease":
        return { ...(await call("POST", attemptPath("lease", c.attempt), { token: machineToken(c.machine), body: {} })), t0 };
      case "launch_failed":
        return { ...(await call("POST", attemptPath("launch-failed", c.attempt), { token: machineToken(c.machine), body: { error: "image pull failed" } })), t0 };
      case "stopped":
        return { ...(await call("POST", attemptPath("stopped", c.attempt), { token: machineToken(c.machine), body: { sandbox_id: `sbx-${c.attempt}`, reason: "sandbox gone" } })), t0 };
      case "report":
        return { ...(await call("POST", `/v1/runs/${this.runId}/reports`, { token: c.token, body: { seq: c.seq, ...reportBody(c.report, c.phase, this.history.length) } })), t0 };
      case "cancel":
        return { ...(await call("POST", `/v1/runs/${this.runId}/cancel`, { token: admin, body: { reason: "model" } })), t0 };
      case "alarm": {
        if (c.ageMs > 0) await ageRun(this.runId, c.ageMs);
        if (c.ageMs > 0 && this.view.publication) await agePublication(this.runId, c.ageMs);
        const at = Date.now();
        await runAlarm(this.runId);
        // The run's own alarm may be taking the PR step right now: its end (or its next try, later) is this alarm's answer.
        if (this.model.publication === "pushed") await waitUntil(async () => (prStepPending(await this.read()) ? undefined : true));
        return { status: 200, body: {}, t0: at };
      }
      case "dispatch_again": {
        const body = c.samePayload ? this.body : { ...this.body, brief: `${this.body.brief} (changed)` };
        return { ...(await call("POST", "/v1/runs", { token: admin, body, headers: { "Idempotency-Key": this.key } })), t0 };
      }
      case "redeliver":
        return { ...(await call("POST", `/v1/runs/${this.runId}/events/redeliver`, { token: admin, body: { after: 0 } })), t0 };
      case "authorize":
        return { ...(await authorize(this.runId)), t0 };
      case "pause":
      case "resume":
        return { ...(await call("POST", `/v1/runs/${this.runId}/${c.kind}`, { token: admin, body: {} })), t0 };
      case "checkpoint":
        return { ...(await call("POST", attemptPath("checkpoint", c.attempt), { token: c.token, body: { session_id: "s", session: { n: 1 }, patch: "" } })), t0 };
      case "checkpoint_unusable":
        return { ...(await call("POST", attemptPath("checkpoint-unusable", c.attempt), { token: machineToken(c.machine), body: { reason: "the patch does not apply" } })), t0 };
      case "push_credential":
        return { ...(await call("POST", attemptPath("push-credential", c.attempt), { token: machineToken(c.machine), body: {} })), t0 };
      case "pushed": {
        const branch = `docket/${this.runId}`;
        host.branches.set(branch, c.moved ? "c".repeat(40) : PUSHED_SHA);
        host.failReadsNext = c.hostDown ? 1 : 0;
        const body = { branch: c.branch === "own" ? branch : "main", head_sha: PUSHED_SHA };
        return { ...(await call("POST", attemptPath("pushed", c.attempt), { token: machineToken(c.machine), body })), t0 };
      }
    }
  }

  /** The run and its new events as of one moment: the alarm may change the run between two reads. */
  async snapshot(): Promise<{ view: RunView; fresh: StoredEvent[] }> {
    let fresh = await this.readEvents(this.events.length);
    for (let i = 0; i < 5; i++) {
      const view = await this.read();
      // Events of a change are written with it: the events read first cover the run read after,
      // unless the run changed in between; then the events are read again.
      const changes = fresh.filter((e) => e.type === "run.state");
      const stateOfEvents = changes.length > 0 ? changes[changes.length - 1].data.to : this.view.state;
      // A PR step's failed try changes no state: its event is counted against the run's tries.
      const retries = fresh.filter((e) => e.type === "run.publication" && e.data.step === "retry").length;
      const triesAgree = view.state !== "publishing" || (view.publication?.tries ?? 0) === (this.view.publication?.tries ?? 0) + retries;
      if (stateOfEvents === view.state && triesAgree) return { view, fresh };
      fresh = await this.readEvents(this.events.length);
    }
    throw new Error(`run ${this.runId} kept changing while it was read`);
  }

  async read(): Promise<RunView> {
    const view = await runStub(this.runId).read(orgId);
    if ("error" in view) throw new Error(`read: ${JSON.stringify(view.error)}`);
    return view as RunView;
  }

  async readEvents(after: number): Promise<StoredEvent[]> {
    const res = await runStub(this.runId).readEvents(orgId, after, 1_000);
    if ("error" in res) throw new Error(`events: ${JSON.stringify(res.error)}`);
    return res.events.map((e) => ({ ...e, data: JSON.parse(e.data) }));
  }

  ensure(ok: boolean, what: string, detail: unknown = ""): void {
    if (ok) return;
    const lines = [`invariant broken: ${what}`, detail === "" ? "" : `detail: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`];
    lines.push(`run ${this.runId}: ${describeRun(this.model)}`, "history:", ...this.history.map((h, i) => `  ${i}. ${h}`));
    throw new Error(lines.filter(Boolean).join("\n"));
  }

  /** One call, its answer matched against the model, then every invariant. */
  async step(c: Call): Promise<void> {
    await within(STEP_LIMIT_MS, this.stepUnbounded(c), () => `step ${JSON.stringify(c)} did not finish; history:\n${this.history.join("\n")}`);
  }

  async stepUnbounded(c: Call): Promise<void> {
    // An alarm's ageRun moves the run's clock: the times it keeps are that much earlier now.
    const prev = c.kind === "alarm" ? shifted(this.view, c.ageMs) : this.view;
    const res = await this.send(c);
    const t1 = Date.now();
    const outcomes = withBackground(predict(this.model, c, res.t0, t1, timing), timing, res.t0, t1 + GUARD_MS);
    const { view, fresh } = await this.snapshot();
    const t2 = Date.now();
    const code: string | null = res.status >= 400 ? (res.body?.error?.code ?? "<no code>") : null;
    const summary = `${JSON.stringify(c)} → ${res.status}${code ? ` ${code}` : ""}; run ${view.state} attempt ${view.attempt}${view.stop_request ? " stop" : ""}`;
    this.history.push(summary);
    this.last = c;
    const pushed = this.model.publication === "pushed" ? " (pushed)" : "";
    const where = this.model.state === "publishing" ? ` while publishing${pushed}` : this.model.publication ? ` on a ${this.model.state} publication${pushed}` : "";
    const tally = `${c.kind}${c.kind === "claim" && c.stale ? " through a stale row" : ""} ${res.status}${code ? ` ${code}` : ""}${where}`;
    answers.set(tally, (answers.get(tally) ?? 0) + 1);

    if (res.status >= 400) {
      this.ensure(typeof res.body?.error?.code === "string" && typeof res.body.error.message === "string", "a refusal is a structured error", res.body);
    }
    const o = outcomes.find((x) => matches(x, res.status, code, view));
    this.ensure(
      o !== undefined,
      "the answer and the run are one of those the model allows",
      `allowed: ${outcomes.map((x) => `${x.status}${x.code ? ` ${x.code}` : ""} → ${describeRun(x.next)} (${x.why})`).join(" | ")}; got ${res.status} ${JSON.stringify(res.body).slice(0, 300)} with run ${view.state} attempt=${view.attempt} holder=${view.machine_id} sandbox=${view.sandbox_id} stop=${view.stop_request !== null}`,
    );
    const outcome = o!;

    this.checkAnswer(c, res, outcome);
    this.checkRun(prev, view, c, res.status, outcome);
    this.checkEvents(prev, view, fresh, c, res.status, outcome);
    this.checkTimes(view, outcome, c, res.t0, t2);
    this.lastStepEndMs = t2;

    // The model takes the run's clock from the run itself: ageRun moved it, calls set it.
    const stepIndex = view.attempt - 1;
    this.model = {
      ...outcome.next,
      leaseAt: view.lease_expires_at_ms,
      launchDeadlineAt: view.launch_deadline_at_ms,
      lastReportAt: view.last_report_at_ms,
      notBefore: view.not_before_ms,
      launchedAt: outcome.launches ? view.steps[stepIndex].launched_at_ms : outcome.next.launchedAt,
      prRetryAt: view.publication?.next_try_at_ms ?? null,
    };
    if ((c.kind === "cancel" && (res.status === 200 || res.status === 202)) || view.stop_request !== null) this.cancelAccepted = true;
    this.view = view;
    this.events.push(...fresh);
    await this.checkAlarm();
    await this.checkCredit(view);
  }

  /**
   * DESIGN.md's invariants 5 and 9 after every step: the ledger identity holds and its audit finds
   * nothing, and a run behind the project's budget gate that executes holds exactly one `held`
   * reservation, in the ledger and in its scheduler's budget.
   */
  async checkCredit(view: RunView): Promise<void> {
    const audited = await audit(env.DB, orgId);
    this.ensure(audited.ok && audited.identity, "the ledger identity holds: available + held + spent = granted", audited.problems);
    if (!this.publishes || !SLOT_STATES.has(view.state)) return;
    const rows = await env.DB.prepare("SELECT status, reserved_cents FROM run_reservations WHERE run_id = ?").bind(this.runId).all<{ status: string; reserved_cents: number }>();
    const held = rows.results.filter((r) => r.status === "held");
    // The run's alarm may finish a publication after `view` was read, and the outbox then settles
    // its reservation: a run that has ended since is no longer executing.
    if (held.length !== 1 && isTerminal((await this.read()).state)) return;
    this.ensure(held.length === 1 && held[0].reserved_cents === PER_RUN_CENTS, "an executing run behind a budget gate holds exactly one reservation", rows.results);
    const holds = await runInDurableObject(schedulerOf(orgId), (_o, state) =>
      state.storage.sql.exec<{ status: string }>("SELECT status FROM budget_holds WHERE run_id = ?", this.runId).toArray(),
    );
    this.ensure(holds.length === 1 && holds[0].status === "held", "the scheduler's budget counts the executing run's one reservation", holds);
  }

  /** The run's D1 queue row says queued while its run object does not (a projection not caught up yet). */
  async staleQueueRow(): Promise<void> {
    if (this.model.state === "queued") return;
    const row = await env.DB.prepare("UPDATE runs SET state = 'queued', not_before_ms = 0 WHERE id = ? RETURNING labels_key").bind(this.runId).first<{ labels_key: string }>();
    await env.DB.prepare("INSERT INTO label_sets (org_id, labels_key, created_at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING").bind(orgId, row!.labels_key, Date.now()).run();
    await schedulerOf(orgId).notifyWork(row!.labels_key);
  }

  /**
   * Every unfinished run has its alarm armed at or before its next deadline: the reaper's (from the
   * model), the end of its backoff, an outbox retry. An alarm that is firing right now is not armed
   * while it runs, so an absent alarm is looked at again for a moment before it counts as lost.
   * (A change of state always bumps the version; only the lease, reports and the sandbox id do not.)
   */
  async checkAlarm(): Promise<void> {
    if (isTerminal(this.model.state)) return;
    for (let tries = 1; ; tries++) {
      const { alarm, version, tries, outboxAt, readAt } = await runInDurableObject(runStub(this.runId), async (_o, state) => ({
        alarm: await state.storage.getAlarm(),
        version: state.storage.sql.exec<{ version: number }>("SELECT version FROM run").one().version,
        tries: (JSON.parse(state.storage.sql.exec<{ doc: string }>("SELECT doc FROM run").one().doc) as RunRecord).publication?.tries ?? 0,
        outboxAt: state.storage.sql
          .exec<{ at: number | null }>("SELECT MIN(next_attempt_at_ms) AS at FROM outbox WHERE sent_at_ms IS NULL AND attempts < ?", config.outboxMaxAttempts)
          .one().at,
        readAt: Date.now(),
      }));
      const deadlines: number[] = [];
      const reap = reapAt(this.model, timing);
      // A pushed publication's next step is due at once: its alarm is armed for the moment of the push.
      const publicationDue = this.model.publication === "pushed";
      if (reap !== null) deadlines.push(publicationDue ? Math.max(reap, readAt) : reap);
      if (this.model.state === "queued" && this.model.notBefore > readAt) deadlines.push(this.model.notBefore);
      if (outboxAt !== null) deadlines.push(Math.max(outboxAt, readAt + config.outboxBackoffMs));
      // An alarm that fired since the step changed the run: the next step checks the run it left.
      // (A PR step's failed try moves the next one without a new version.)
      if (deadlines.length === 0 || version !== this.view.version || tries !== (this.view.publication?.tries ?? 0)) return;
      // An alarm taking a PR step asks the project store (D1) first: it may take a while to end.
      if (alarm === null && tries < (publicationDue ? 100 : 10)) {
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      const next = Math.min(...deadlines);
      this.ensure(alarm !== null && alarm <= next, "an unfinished run has its alarm armed at or before its next deadline", { alarm, next, deadlines });
      return;
    }
  }

  checkAnswer(c: Call, res: { status: number; body: Json }, o: Outcome): void {
    const shown = o.answer ?? o.next;
    if (c.kind === "claim" && res.status === 200) {
      this.ensure(res.body.run_id === this.runId, "a claim hands out only this sequence's run (every other run ended)", res.body.run_id);
      this.ensure(res.body.attempt === this.grants.length + 1, "each claim is exactly the next attempt", res.body.attempt);
      this.ensure(/^dkt_a_[0-9a-f]{64}$/.test(res.body.attempt_token), "a claim carries a run-attempt token");
      this.ensure(!this.tokens.includes(res.body.attempt_token), "each attempt gets its own token");
      this.grants.push(c.machine);
      this.tokens.push(res.body.attempt_token);
      // A publication continuation is a push-only job carrying the stored patch.
      if (o.next.state === "publishing") this.ensure(res.body.publication?.branch === `docket/${this.runId}` && res.body.publication.patch === COMPLETED_PATCH, "a publication continuation is claimed as a push-only job", res.body);
    }
    if (c.kind === "push_credential" && res.status === 200) {
      this.ensure(res.body.run_id === this.runId && res.body.attempt === c.attempt && res.body.branch === `docket/${this.runId}` && typeof res.body.token === "string", "a push credential names the run's attempt and its one branch", res.body);
    }
    const attemptCalls = ["launched", "lease", "launch_failed", "stopped", "report", "checkpoint", "checkpoint_unusable", "pushed"];
    if (attemptCalls.includes(c.kind) && res.status === 200) {
      this.ensure(res.body.run_id === this.runId && res.body.attempt === shown.attempt && res.body.state === shown.state, "an attempt call answers the run as it left it", res.body);
      this.ensure(res.body.stop_requested === shown.stop, "the answer carries stop_requested", res.body);
      this.ensure(res.body.pause_requested === (shown.state === "pausing"), "the answer carries pause_requested while the run is pausing", res.body);
    }
    if ((c.kind === "pause" || c.kind === "resume") && res.status === 200) this.ensure(res.body.state === shown.state && res.body.hold === !!shown.hold, "a pause or resume answers the run", res.body);
    if (c.kind === "cancel" && res.status < 300) this.ensure(res.body.state === shown.state, "a cancel answers the run", res.body.state);
    if (c.kind === "dispatch_again" && res.status === 200) this.ensure(res.body.id === this.runId, "a replayed dispatch answers the same run", res.body.id);
    if (res.status === 409 && res.body.error.code === "stale_attempt") {
      this.ensure(res.body.error.current_attempt === this.model.attempt, "stale_attempt names the current attempt", res.body.error);
    }
  }

  checkRun(prev: RunView, view: RunView, c: Call, status: number, o: Outcome): void {
    if (isTerminal(prev.state)) this.ensure(deepEqual(view, prev), "a terminal run never changes", diff(prev, view));
    if (o.effect === "none" && !o.background) this.ensure(deepEqual(view, prev), `${status >= 400 ? "a refused call" : "this call"} changes nothing`, diff(prev, view));
    if (o.effect === "lease" && !o.background) {
      this.ensure(deepEqual({ ...view, lease_expires_at_ms: 0, updated_at_ms: 0 }, { ...prev, lease_expires_at_ms: 0, updated_at_ms: 0 }), "a lease refresh changes only the lease", diff(prev, view));
    }
    // Attempts: one per claim, in order, each held by the one machine that was granted it.
    const claimed = c.kind === "claim" && status === 200;
    this.ensure(view.attempt === prev.attempt + (claimed ? 1 : 0), "the attempt grows by one per claim and only then", { before: prev.attempt, after: view.attempt });
    this.ensure(view.steps.length === view.attempt, "one step per attempt", view.steps.length);
    view.steps.forEach((s, i) => {
      this.ensure(s.attempt === i + 1 && s.machine_id === this.grants[i], "each step is held by the machine granted that attempt", s);
      if (i < view.attempt - 1) this.ensure(s.ended_at_ms !== null && ["requeued", "blocked", "paused", "checkpoint_unusable"].includes(s.outcome ?? ""), "an attempt before the current one ended requeued, blocked or paused", s);
      if (i < prev.steps.length && prev.steps[i].ended_at_ms !== null) this.ensure(deepEqual(s, prev.steps[i]), "an ended attempt never changes", diff(prev.steps[i], s));
    });
    this.ensure(view.version >= prev.version && (view.state === prev.state || view.version > prev.version), "the version only grows, with every change of state", { before: prev.version, after: view.version });
    // A cancel outranks every requeue and failure path.
    if (this.cancelAccepted || view.stop_request !== null) {
      this.ensure(view.stop_request !== null, "an accepted cancel stays recorded");
      this.ensure(!["queued", "failed", "completed"].includes(view.state), "once a cancel was accepted the run is never requeued, failed or completed", view.state);
    }
    if (view.state === "cancelled") this.ensure(view.stop_request !== null, "a cancelled run carries its stop request");
    this.ensure(view.phase === o.next.phase, "the phase is the last one reported", view.phase);
    this.ensure(view.hold === !!o.next.hold, "the operator hold is set by a pause or an unusable checkpoint and cleared only by the operator's resume", view.hold);
    this.ensure((view.checkpoint?.attempt ?? null) === (o.next.checkpointAttempt ?? null), "the checkpoint is the last one a pausing attempt stored", view.checkpoint);
    if (view.state === "paused") this.ensure(view.machine_id === null && view.lease_expires_at_ms === null, "a paused run holds no machine and no lease", view);
  }

  checkEvents(prev: RunView, view: RunView, fresh: StoredEvent[], c: Call, status: number, o: Outcome): void {
    const first = this.events.length + 1;
    fresh.forEach((e, i) => {
      this.ensure(e.seq === first + i, "events are numbered from 1 without gaps or duplicates", fresh.map((x) => x.seq));
      this.ensure(e.data.run_id === this.runId, "every event names its run", e);
    });
    if (status >= 400 || (o.effect !== "change" && !o.background)) this.ensure(fresh.length === 0, "a call that changed nothing wrote no event", fresh);
    // The run.state events chain the previous observed state to this one, each hop one the table permits.
    let state = prev.state;
    for (const e of fresh.filter((x) => x.type === "run.state")) {
      this.ensure(e.data.from === state && permitted(e.data.from, e.data.to), "every state change is one DESIGN.md's table permits, in order", { from: state, event: e.data });
      this.ensure(e.data.attempt === view.attempt, "a state change names the attempt it belongs to", e.data);
      state = e.data.to;
    }
    this.ensure(state === view.state, "a change of state is never visible without its event", { events_end_at: state, run: view.state });
    const stops = fresh.filter((x) => x.type === "run.stop_requested").length;
    const stopsBefore = this.events.filter((x) => x.type === "run.stop_requested").length;
    this.ensure(stopsBefore + stops <= 1, "a stop request is announced at most once", fresh);
    if (prev.stop_request === null && view.stop_request !== null && prev.state !== "queued" && prev.state !== "blocked" && prev.state !== "paused") {
      this.ensure(stops === 1, "a stop request recorded on a held run is announced", fresh);
    }
    if (c.kind === "report" && status === 200) {
      const outputs = fresh.filter((x) => x.type === "run.output");
      this.ensure(outputs.length === (c.report === "lines" && o.effect === "change" ? 1 : 0), "a report's lines are one run.output event, and a report sent again adds none", outputs);
      if (outputs.length === 1) this.ensure(outputs[0].data.attempt === c.tokenAttempt, "output names the attempt that sent it", outputs[0].data);
    }
  }

  checkTimes(view: RunView, o: Outcome, c: Call, t0: number, t2: number): void {
    const ttl = timing.leaseTtlMs;
    if (o.setsLease && !o.background) {
      const at = view.lease_expires_at_ms ?? -1;
      this.ensure(at >= t0 + ttl && at <= t2 + ttl, "a claim, launch or refresh sets the lease to now + TTL", { t0, t2, at });
    }
    if (o.backoffFor !== undefined) {
      const [lo, hi] = backoffRange(timing, o.backoffFor);
      // The run's real alarm may have requeued it between the previous step and this one's ageRun,
      // which then moved the backoff back by ageMs with the rest of the run's clock.
      const from = c.kind === "alarm" && c.ageMs > 0 && this.lastStepEndMs > 0 ? Math.min(t0, this.lastStepEndMs - c.ageMs) : t0;
      this.ensure(view.not_before_ms >= from + lo - 1 && view.not_before_ms <= t2 + hi + 1, "a requeue backs off within [d/2, d]", { t0, t2, from, not_before: view.not_before_ms, lo, hi });
    }
  }

  /** When a deadline is due or about to be, the alarm fires now (moving the clock past it if needed). */
  async settle(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      const at = reapAt(this.model, timing);
      const now = Date.now();
      if (at === null || at > now + GUARD_MS) return;
      await this.step({ kind: "alarm", ageMs: Math.max(0, at - now) + GUARD_MS });
    }
  }

  /** The end of a sequence: the HTTP API agrees with the run object, and a cancel always ends cancelled. */
  async finish(): Promise<void> {
    const http = await call("GET", `/v1/runs/${this.runId}`, { token: admin });
    this.ensure(http.status === 200, "GET /v1/runs/:id answers", http.body);
    // `callback` lives in D1 and `waiting` is explained against the clock: neither is the run object's.
    const { callback: _callback, waiting: _waiting, ...shown } = http.body;
    this.ensure(deepEqual(shown, this.view), "GET /v1/runs/:id shows the run object's run", diff(this.view, shown));
    const listed = await call("GET", `/v1/runs/${this.runId}/events?limit=1000`, { token: admin });
    this.ensure(listed.status === 200 && deepEqual(listed.body.events, this.events), "GET /v1/runs/:id/events shows every event once, in order, unchanged", listed.body);
    this.ensure(listed.body.terminal === isTerminal(this.view.state), "events say whether the run ended", listed.body.terminal);

    // A publishing run refuses a cancel: once its lease is gone it pauses, and the next round cancels
    // it; a pushed one's PR step, its code host reachable again, completes it.
    host.failReadsNext = 0;
    this.model = { ...this.model, hostFailures: 0 };
    for (let round = 0; round < 2 && !isTerminal(this.model.state); round++) {
      await this.step({ kind: "cancel" });
      await this.settle();
      if (!isTerminal(this.model.state)) {
        // No runner carries the stop: once the lease is gone the reaper does.
        await this.step({ kind: "alarm", ageMs: timing.daemonSilenceMs + timing.launchDeadlineMs + GUARD_MS });
      }
    }
    if (this.cancelAccepted) this.ensure(this.view.state === "cancelled", "once a cancel was accepted the run ends cancelled", this.view.state);
    // The D1 queue row is a projection of the run object: it catches up with the run's version.
    const row = await waitUntil(async () => {
      const r = await env.DB.prepare("SELECT state, attempt, version FROM runs WHERE id = ?").bind(this.runId).first<{ state: string; attempt: number; version: number }>();
      return r && r.version === this.view.version ? r : undefined;
    });
    this.ensure(row !== undefined && row.state === this.view.state && row.attempt === this.view.attempt, "the queue row shows the run's state, attempt and version", row);
    this.ensure(isTerminal(this.view.state), "the run ended");
    if (this.tokens.length > 0) foreignToken = this.tokens[this.tokens.length - 1];
  }

  /** After a failure: keep the run from being claimed by later sequences. */
  async abandon(): Promise<void> {
    if (this.runId) await call("POST", `/v1/runs/${this.runId}/cancel`, { token: admin, body: {} }).catch(() => undefined);
  }
}

function reportBody(kind: ReportKind, phase: string | null, n: number): Json {
  switch (kind) {
    case "phase":
      return { phase };
    case "lines":
      return { lines: [`line ${n}`, "more output"] };
    case "empty":
      return {};
    case "completed":
      return { phase, final: { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch: COMPLETED_PATCH, source_revision: "abc1234" }, cost_cents: 12 } };
    case "failed":
      return { final: { outcome: "failed", error: "tests failed", exit_codes: { agent: 1 } } };
    case "blocked":
      return { final: { outcome: "blocked", exit_codes: { agent: 0 }, blocker: { summary: "which database?", evidence: ["two configs"], questions: ["postgres or sqlite?"], human_action: "answer on the issue" } } };
  }
}

/** The ticket's authorization of a blocked run (no HTTP route: a human readiness change drives it), as an HTTP-like answer. */
async function authorize(runId: string): Promise<{ status: number; body: Json }> {
  const answer = await runStub(runId).control(orgId, { type: "authorize" });
  if (isRefusal(answer)) return { status: ERROR_STATUS[answer.error.code as ErrorCode], body: answer };
  return { status: 200, body: answer };
}

function matches(o: Outcome, status: number, code: string | null, view: RunView): boolean {
  const n = o.next;
  return (
    o.status === status &&
    o.code === code &&
    view.state === n.state &&
    view.attempt === n.attempt &&
    view.machine_id === n.holder &&
    view.sandbox_id === n.sandbox &&
    (view.stop_request !== null) === n.stop &&
    publicationOf(view) === (n.publication ?? null) &&
    (view.publication?.tries ?? 0) === (n.prTries ?? 0)
  );
}

const publicationOf = (view: RunView) => (!view.publication ? null : view.publication.head_sha === null ? "intent" : "pushed");

/** A pushed publication whose PR step is due and not taken yet. */
function prStepPending(view: RunView): boolean {
  const p = view.publication;
  return !!p && p.head_sha !== null && (view.state === "queued" || (view.state === "publishing" && (p.next_try_at_ms ?? 0) <= Date.now()));
}

/** The publication's next try is on the run's clock too (ageRun moves the rest). */
async function agePublication(runId: string, ms: number): Promise<void> {
  await editStoredRun(runId, (run) => {
    if (run.publication?.nextTryAtMs != null) run.publication.nextTryAtMs -= ms;
  });
}

/** Polls `probe` until it gives a value, for at most `limitMs`; undefined when it never did. */
async function waitUntil<T>(probe: () => Promise<T | undefined>, limitMs = 10_000): Promise<T | undefined> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every event of every run reached D1 through the Queue exactly once: seq 1..n, none missing. */
async function expectEventsStored(lastSeqs: Map<string, number>): Promise<void> {
  const missing = await waitUntil(async () => {
    const rows = await env.DB.prepare("SELECT run_id, COUNT(*) AS n, MIN(seq) AS lo, MAX(seq) AS hi FROM events GROUP BY run_id").all<{ run_id: string; n: number; lo: number; hi: number }>();
    const stored = new Map(rows.results.map((r) => [r.run_id, r]));
    const wrong = [...lastSeqs].filter(([id, last]) => {
      const r = stored.get(id);
      return !r || r.n !== last || r.lo !== 1 || r.hi !== last;
    });
    return wrong.length === 0 ? null : undefined;
  }, 60_000);
  expect(missing, "every outbox event stored once in D1").toBe(null);
}

/** A step that does not answer within the limit fails with what it was doing (no step waits on time). */
const STEP_LIMIT_MS = 20_000;

async function within<T>(ms: number, work: Promise<T>, what: () => string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(what())), ms);
  });
  try {
    return await Promise.race([work, limit]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

function shifted(view: RunView, ms: number): RunView {
  const back = (v: number | null) => (v === null ? null : v - ms);
  return {
    ...view,
    lease_expires_at_ms: back(view.lease_expires_at_ms),
    launch_deadline_at_ms: back(view.launch_deadline_at_ms),
    last_report_at_ms: back(view.last_report_at_ms),
    not_before_ms: view.not_before_ms - ms,
    publication: view.publication && { ...view.publication, next_try_at_ms: back(view.publication.next_try_at_ms) },
  };
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function diff(a: Json, b: Json): Json {
  const out: Json = {};
  for (const k of new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})])) {
    if (JSON.stringify(a?.[k]) !== JSON.stringify(b?.[k])) out[k] = { before: a?.[k], after: b?.[k] };
  }
  return out;
}

/** One lane: its share of the sequences, with its own seed derived from the printed one. */
export function modelLane(lane: number): void {
  const runs = Math.ceil(RUNS / LANES);
  const seed = SEED + lane;
  describe(`the run objects against the model, through the HTTP API (lane ${lane} of ${LANES})`, () => {
    beforeAll(setUp);

    it(
      `keeps every invariant over ${runs} random sequences (seed ${SEED}, lane seed ${seed})`,
      async () => {
        console.log(`model lane ${lane}: ${runs} sequences of up to ${MAX_STEPS} steps, seed ${SEED} (replay with MODEL_SEED=${SEED})`);
        let sequences = 0;
        let steps = 0;
        const reached = new Set<string>();
        const lastSeqs = new Map<string, number>();
        answers.clear();
        await fc.assert(
          fc.asyncProperty(planArb, async (plan) => {
            const seq = new Sequence(plan.publishes);
            try {
              await seq.dispatch();
              for (const s of plan.steps) {
                await seq.step(seq.resolve(s));
                await seq.settle();
                reached.add(seq.model.state);
              }
              await seq.finish();
              lastSeqs.set(seq.runId, seq.events.length);
            } catch (err) {
              await seq.abandon();
              throw err;
            }
            sequences += 1;
            steps += plan.steps.length;
          }),
          { numRuns: runs, seed },
        );
        console.log(`model lane ${lane}: ${sequences} sequences, ${steps} generated steps, states reached: ${[...reached].sort().join(", ")}`);
        console.log(`model lane ${lane} answers: ${[...answers.entries()].sort().map(([k, n]) => `${k} ×${n}`).join(", ")}`);
        expect(sequences).toBeGreaterThanOrEqual(runs);
        // Invariant 6: the consumer stored every event of every run once, duplicate deliveries included.
        await expectEventsStored(lastSeqs);
      },
      Math.max(600_000, runs * 1_000),
    );
  });
}
