// Concurrency: many claims, calls and dispatches at once. Every claim of a run is exactly one
// attempt, two machines never hold the same attempt, and no queued run is lost
// (../shared/DESIGN.md, invariants 1, 2 and 3; "Claims are serialized per organization").

import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { callDirect as call } from "./direct";
import { ageRun, CLI_VERSION, createOrg, registerRunner, runAlarm, runBody } from "./helpers";
import { muteTransitionLogs } from "./quiet";

type Json = Record<string, any>;

const RUNS = 50;
const CLAIMS = 200;
const MACHINES = 20;

beforeAll(() => muteTransitionLogs());

async function orgWithMachines(n: number) {
  const { admin, orgId } = await createOrg("race");
  const machines: { machineId: string; token: string }[] = [];
  for (let i = 0; i < n; i++) machines.push(await registerRunner(admin, { name: `box-${i}` }));
  return { admin, orgId, machines };
}

async function dispatchMany(admin: string, n: number): Promise<string[]> {
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => call("POST", "/v1/runs", { token: admin, body: runBody({ brief: `run ${i}` }) })));
  for (const a of answers) expect(a.status).toBe(201);
  return answers.map((a) => a.body.id as string);
}

function claimWith(token: string, waitMs = 0) {
  return call("POST", "/v1/runners/claim", { token, body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: waitMs } });
}

/** `CLAIMS` claims at once, spread over the machines; each answer with the machine that asked. */
async function claimRace(machines: { machineId: string; token: string }[], waitMs = 0) {
  return Promise.all(
    Array.from({ length: CLAIMS }, async (_, i) => {
      const m = machines[i % machines.length];
      return { machineId: m.machineId, token: m.token, res: await claimWith(m.token, waitMs) };
    }),
  );
}

async function getRun(admin: string, id: string): Promise<Json> {
  const res = await call("GET", `/v1/runs/${id}`, { token: admin });
  expect(res.status).toBe(200);
  return res.body;
}

async function queuedRows(orgId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS n FROM runs WHERE org_id = ? AND state = 'queued'").bind(orgId).first<{ n: number }>();
  return row?.n ?? -1;
}

describe("200 claims racing for 50 runs", () => {
  it("grants each run exactly once per attempt, to one machine, and loses none, over two attempts", async () => {
    const { admin, orgId, machines } = await orgWithMachines(MACHINES);
    const runIds = await dispatchMany(admin, RUNS);

    // Attempt 1: 200 claims at once.
    const first = await claimRace(machines);
    const granted1 = first.filter((c) => c.res.status === 200);
    expect(first.every((c) => c.res.status === 200 || c.res.status === 204)).toBe(true);
    expect(granted1).toHaveLength(RUNS);
    expect(new Set(granted1.map((c) => c.res.body.run_id))).toEqual(new Set(runIds));
    expect(granted1.every((c) => c.res.body.attempt === 1)).toBe(true);
    expect(new Set(granted1.map((c) => c.res.body.attempt_token)).size).toBe(RUNS);
    expect(await queuedRows(orgId)).toBe(0);
    const holder1 = new Map(granted1.map((c) => [c.res.body.run_id as string, c]));
    for (const id of runIds) {
      const run = await getRun(admin, id);
      expect(run.state).toBe("claimed");
      expect(run.attempt).toBe(1);
      expect(run.machine_id).toBe(holder1.get(id)!.machineId);
      expect(run.steps.map((s: Json) => s.machine_id)).toEqual([holder1.get(id)!.machineId]);
    }

    // Every first attempt fails to launch; with the backoff over, 200 claims race again.
    const failed = await Promise.all(
      granted1.map((c) => call("POST", `/v1/runs/${c.res.body.run_id}/attempts/1/launch-failed`, { token: c.token, body: { error: "image pull failed" } })),
    );
    expect(failed.every((f) => f.status === 200 && f.body.state === "queued")).toBe(true);
    // Aging skips the backoff's wall time; the alarm at its end is what tells the scheduler the
    // run is claimable again (a scheduler that drained the label set forgot it), so run it too.
    for (const id of runIds) {
      await ageRun(id, 60_000);
      await runAlarm(id);
    }
    const second = await claimRace(machines);
    const granted2 = second.filter((c) => c.res.status === 200);
    expect(granted2).toHaveLength(RUNS);
    expect(new Set(granted2.map((c) => c.res.body.run_id))).toEqual(new Set(runIds));
    expect(granted2.every((c) => c.res.body.attempt === 2)).toBe(true);
    expect(await queuedRows(orgId)).toBe(0);

    // The first attempt's machines are stale now; each run's steps name one machine per attempt.
    const holder2 = new Map(granted2.map((c) => [c.res.body.run_id as string, c]));
    const stale = await Promise.all(granted1.map((c) => call("POST", `/v1/runs/${c.res.body.run_id}/attempts/1/lease`, { token: c.token, body: {} })));
    expect(stale.every((s) => s.status === 409 && s.body.error.code === "stale_attempt" && s.body.error.current_attempt === 2)).toBe(true);
    for (const id of runIds) {
      const run = await getRun(admin, id);
      expect(run.state).toBe("claimed");
      expect(run.attempt).toBe(2);
      expect(run.steps.map((s: Json) => [s.attempt, s.machine_id, s.outcome])).toEqual([
        [1, holder1.get(id)!.machineId, "requeued"],
        [2, holder2.get(id)!.machineId, null],
      ]);
    }
  });

  it("claims racing with cancels: a run cancelled at once is never handed out, a claimed one keeps its stop request", async () => {
    const { admin, orgId, machines } = await orgWithMachines(10);
    const runIds = await dispatchMany(admin, RUNS);
    const [claims, cancels] = await Promise.all([
      claimRace(machines),
      Promise.all(runIds.filter((_, i) => i % 2 === 0).map(async (id) => ({ id, res: await call("POST", `/v1/runs/${id}/cancel`, { token: admin, body: { reason: "race" } }) }))),
    ]);
    const grantedRuns = new Map(claims.filter((c) => c.res.status === 200).map((c) => [c.res.body.run_id as string, c]));
    expect(grantedRuns.size).toBe(claims.filter((c) => c.res.status === 200).length);
    for (const { id, res } of cancels) {
      expect([200, 202]).toContain(res.status);
      const run = await getRun(admin, id);
      if (res.status === 200) {
        // Cancelled while queued: no claim got it.
        expect(grantedRuns.has(id)).toBe(false);
        expect(run.state).toBe("cancelled");
        expect(run.attempt).toBe(0);
      } else {
        // Claimed first: the stop request stands and the claim holds attempt 1.
        expect(grantedRuns.get(id)?.res.body.attempt).toBe(1);
        expect(run.state).toBe("claimed");
        expect(run.stop_request).not.toBeNull();
      }
    }
    // Every run that was not cancelled at once was claimed exactly once.
    const cancelledAtOnce = new Set(cancels.filter((c) => c.res.status === 200).map((c) => c.id));
    expect(new Set(grantedRuns.keys())).toEqual(new Set(runIds.filter((id) => !cancelledAtOnce.has(id))));
    expect(await queuedRows(orgId)).toBe(0);
  });

  it("runners already waiting get every new run exactly once", async () => {
    const { admin, orgId, machines } = await orgWithMachines(MACHINES);
    // Long-polls first (the test binding keeps them at most CLAIM_WAIT_MS = 1 s), then the work.
    const waiting = claimRace(machines, 1_000);
    const runIds = await dispatchMany(admin, RUNS);
    const answers = await waiting;
    const granted = answers.filter((c) => c.res.status === 200).map((c) => c.res.body);
    // A run nobody was still waiting for stays queued, visibly; the next claims take it.
    for (let round = 0; round < 10 && granted.length < RUNS; round++) {
      const more = await claimRace(machines);
      granted.push(...more.filter((c) => c.res.status === 200).map((c) => c.res.body));
    }
    expect(granted).toHaveLength(RUNS);
    expect(new Set(granted.map((g) => g.run_id))).toEqual(new Set(runIds));
    expect(granted.every((g) => g.attempt === 1)).toBe(true);
    expect(await queuedRows(orgId)).toBe(0);
  });
});

describe("the same call at once, many times", () => {
  it("twenty dispatches with one Idempotency-Key make one run: one 201, the rest replay it", async () => {
    const { admin, orgId } = await createOrg("dup");
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => call("POST", "/v1/runs", { token: admin, body: runBody({ brief: "once" }), headers: { "Idempotency-Key": "same-key" } })),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(19);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM runs WHERE org_id = ?").bind(orgId).first<{ n: number }>();
    expect(rows?.n).toBe(1);
  });

  it("a runner's duplicate calls on one attempt take effect once", async () => {
    const { admin } = await createOrg("dup-calls");
    const runner = await registerRunner(admin);
    const runId = (await dispatchMany(admin, 1))[0];
    const claimed = await claimWith(runner.token);
    expect(claimed.status).toBe(200);
    const launched = await Promise.all(
      Array.from({ length: 20 }, () => call("POST", `/v1/runs/${runId}/attempts/1/launched`, { token: runner.token, body: { sandbox_id: "sbx-1" } })),
    );
    expect(launched.every((l) => l.status === 200 && l.body.state === "implementing")).toBe(true);
    // Two final reports race: exactly one ends the run, the other finds it gone.
    const finals = await Promise.all([
      call("POST", `/v1/runs/${runId}/reports`, { token: claimed.body.attempt_token, body: { final: { outcome: "completed", artifact: { patch: "diff" } } } }),
      call("POST", `/v1/runs/${runId}/reports`, { token: claimed.body.attempt_token, body: { final: { outcome: "failed", error: "boom" } } }),
      call("POST", `/v1/runs/${runId}/reports`, { token: claimed.body.attempt_token, body: { final: { outcome: "completed", artifact: { patch: "diff" } } } }),
    ]);
    expect(finals.filter((f) => f.status === 200)).toHaveLength(1);
    expect(finals.filter((f) => f.status === 410 && f.body.error.code === "task_gone")).toHaveLength(2);
    const events = await call("GET", `/v1/runs/${runId}/events?limit=1000`, { token: admin });
    const hops = events.body.events.filter((e: Json) => e.type === "run.state").map((e: Json) => `${e.data.from}->${e.data.to}`);
    expect(hops).toHaveLength(3);
    expect(hops.slice(0, 2)).toEqual(["queued->claimed", "claimed->implementing"]);
    expect(["implementing->completed", "implementing->failed"]).toContain(hops[2]);
    expect(events.body.events.map((e: Json) => e.seq)).toEqual(events.body.events.map((_: Json, i: number) => i + 1));
  });

  it("launch failures reported at once by every machine requeue the run once, for the machine that holds it", async () => {
    const { admin, machines } = await orgWithMachines(5);
    const runId = (await dispatchMany(admin, 1))[0];
    const claimed = await claimWith(machines[0].token);
    expect(claimed.status).toBe(200);
    const answers = await Promise.all(
      machines.flatMap((m) => [0, 1, 2].map(() => call("POST", `/v1/runs/${runId}/attempts/1/launch-failed`, { token: m.token, body: { error: "pull failed" } }))),
    );
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(1);
    expect(ok[0].body.state).toBe("queued");
    // The holder's duplicates find the attempt requeued; other machines never held it.
    for (const a of answers.filter((x) => x.status !== 200)) expect(["lease_expired", "other_machine"]).toContain(a.body.error.code);
    const run = await getRun(admin, runId);
    expect(run.attempt).toBe(1);
    expect(run.steps.map((s: Json) => s.outcome)).toEqual(["requeued"]);
  });
});
