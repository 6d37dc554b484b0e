// The managed pools' scaler against real D1 state (docs/managed-runners.md, "Scaling"): queued
// runs, connected runners and their waiting claims, and the pool's slots. The containers are
// stand-ins (test/workers/managed-fakes.ts); their runners register and claim through the API.

import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { loadConfig, type Config } from "../../src/config";
import { scalePools } from "../../src/managed/scaler";
import { callDirect as call } from "./direct";
import { CLI_VERSION, createOrg, dispatch, registerRunner, setSchedulerConfig, untilClaimWaits } from "./helpers";
import { installFakeContainers, registerLaunched, removeContainers, type FakeContainers } from "./managed-fakes";

const config = loadConfig(env);
let containers: FakeContainers;
let orgId: string;
let admin: string;

beforeEach(async () => {
  containers = installFakeContainers();
  ({ orgId, admin } = await createOrg("scaler"));
});

async function createPool(body: Record<string, unknown>) {
  const res = await call("POST", "/v1/managed/pools", { token: admin, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

const readPool = async (id: string) => (await call("GET", `/v1/managed/pools/${id}`, { token: admin })).body;
const tick = (nowMs: number, with_: Partial<Config> = {}) => scalePools(env, { ...config, ...with_ }, nowMs);
const claimAs = (token: string, waitMs = 0) => call("POST", "/v1/runners/claim", { token, body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: waitMs } });
const runnerIds = async () => ((await call("GET", "/v1/runners", { token: admin })).body.runners as { id: string }[]).map((r) => r.id);

/**
 * Runs a tick while the machine's claim waits for work in the scheduler (an idle runner). The
 * scheduler lets a claim wait a minute here (the tests' CLAIM_WAIT_MS is 1 s, shorter than a tick on
 * a loaded machine); the claim is ended the way a stopping runner ends it, and ending one shows it
 * still waited when the tick was done, however slow the tick was.
 */
async function tickWhileWaiting(token: string, nowMs: number, expected: "kept" | "halted" = "kept"): Promise<void> {
  await setSchedulerConfig(orgId, { claimWaitMs: 60_000 });
  const waiting = claimAs(token, 60_000);
  await untilClaimWaits(orgId);
  await tick(nowMs);
  if (expected === "halted") {
    // Its machine deregistered by the halt, the waiting claim ends refused.
    const refused = await waiting;
    expect(refused.status, JSON.stringify(refused.body)).toBe(401);
    expect(JSON.stringify(refused.body.error)).toContain("machine_deregistered");
    return;
  }
  expect((await call("POST", "/v1/runners/claim/cancel", { token, body: {} })).body).toMatchObject({ ended: 1 });
  expect((await waiting).status).toBe(204);
}

describe("the managed pool scaler", () => {
  it("a pool below its minimum starts one container per tick, each with a one-use registration token listed with the organization's tokens", async () => {
    const pool = await createPool({ name: "base", labels: ["linux"], min_instances: 2, max_instances: 3 });
    const now = Date.now();
    await tick(now);
    expect(containers.launches(orgId)).toHaveLength(1);
    await tick(now + 1);
    await tick(now + 2);
    const launches = containers.launches(orgId);
    expect(launches).toHaveLength(2);
    expect(launches.map((l) => l.labels)).toEqual([["linux"], ["linux"]]);
    const read = await readPool(pool);
    expect(read.slots.map((s: any) => [s.slot, s.status])).toEqual([[0, "starting"], [1, "starting"]]);
    expect(read.estimated_cost.running_hour_millicents).toBe(2 * config.managedInstanceHourMillicents);
    const tokens = (await call("GET", "/v1/tokens?kind=registration", { token: admin })).body.tokens;
    const minted = tokens.filter((t: any) => read.slots.some((s: any) => s.registration_token_id === t.id));
    expect(minted).toHaveLength(2);
    for (const token of minted) expect(token).toMatchObject({ status: "active", max_uses: 1, expires_at_ms: expect.any(Number) });
  });

  it("a pool scales up for queued runs its labels cover that no connected runner takes, and not for runs it cannot serve", async () => {
    const pool = await createPool({ name: "gpu", labels: ["gpu", "linux"], min_instances: 0, max_instances: 2 });
    await dispatch(admin, { labels: ["windows"] });
    await tick(Date.now());
    expect(containers.launches(orgId)).toEqual([]);
    await dispatch(admin, { labels: ["gpu"] });
    await tick(Date.now());
    expect(containers.launches(orgId)).toHaveLength(1);
    // One slot still starting takes the work: no second one yet.
    await tick(Date.now());
    expect(containers.launches(orgId)).toHaveLength(1);
    expect((await readPool(pool)).slots).toHaveLength(1);
  });

  it("work held by a busy connected runner still scales the pool up, until its maximum", async () => {
    await createPool({ name: "busy", labels: ["gpu"], min_instances: 0, max_instances: 1 });
    const own = await registerRunner(admin, { name: "own", labels: ["gpu"] });
    await dispatch(admin, { labels: ["gpu"] });
    expect((await claimAs(own.token)).status).toBe(200);
    await dispatch(admin, { labels: ["gpu"] });
    await tick(Date.now());
    const [launch] = containers.launches(orgId);
    const managed = await registerLaunched(launch);
    expect((await claimAs(managed.token)).status).toBe(200);
    await dispatch(admin, { labels: ["gpu"] });
    await tick(Date.now());
    expect(containers.launches(orgId)).toHaveLength(1);
  });

  it("a slot whose runner waits for work past the pool's idle time is halted and its machine deregistered, but never below the minimum", async () => {
    const pool = await createPool({ name: "idle-down", min_instances: 2, max_instances: 2, idle_ms: 60_000 });
    const start = Date.now();
    await tick(start);
    await tick(start);
    const [busy, idle] = await Promise.all(containers.launches(orgId).map((l) => registerLaunched(l)));
    expect((await call("PATCH", `/v1/managed/pools/${pool}`, { token: admin, body: { min_instances: 1 } })).status).toBe(200);
    await dispatch(admin);
    expect((await claimAs(busy.token)).status).toBe(200);
    // The idle runner's claim waits: not yet past the idle time, then past it.
    await tickWhileWaiting(idle.token, start + 30_000);
    expect((await readPool(pool)).slots).toHaveLength(2);
    await tickWhileWaiting(idle.token, start + 60_000, "halted");
    const slots = (await readPool(pool)).slots;
    expect(slots.map((s: any) => s.machine_id)).toEqual([busy.machineId]);
    expect(await runnerIds()).not.toContain(idle.machineId);
    expect(containers.running(orgId)).toHaveLength(1);
    // Idle now past a shorter idle time (and still within the connected window), the last runner stays: the pool is at its minimum.
    expect((await call("PATCH", `/v1/managed/pools/${pool}`, { token: admin, body: { idle_ms: 1_000 } })).status).toBe(200);
    await tickWhileWaiting(busy.token, start + 80_000);
    expect((await readPool(pool)).slots.map((s: any) => s.machine_id)).toEqual([busy.machineId]);
  });

  it("a pool read before the next tick shows the machine its new runner registered as, connected", async () => {
    const pool = await createPool({ name: "between-ticks", min_instances: 1, max_instances: 1 });
    await tick(Date.now());
    const runner = await registerLaunched(containers.launches(orgId)[0]);
    // No tick since it registered: the console and the API still name its machine.
    expect((await readPool(pool)).slots).toMatchObject([{ status: "connected", machine_id: runner.machineId }]);
  });

  it("a slot whose runner stopped heartbeating is halted, its machine deregistered, and replaced while the pool is below its minimum", async () => {
    const pool = await createPool({ name: "lost", min_instances: 1, max_instances: 1 });
    const start = Date.now();
    await tick(start);
    const runner = await registerLaunched(containers.launches(orgId)[0]);
    await tick(start + 1);
    expect((await readPool(pool)).slots).toMatchObject([{ status: "connected", machine_id: runner.machineId }]);
    // Nothing heard from it for longer than RUNNER_CONNECTED_WINDOW_MS: lost, as any runner would be.
    await tick(start + config.runnerConnectedWindowMs + 60_000);
    expect(containers.of(orgId)[0].halts).toBe(1);
    expect(await runnerIds()).not.toContain(runner.machineId);
    const launches = containers.launches(orgId);
    expect(launches).toHaveLength(2);
    expect(launches[1].name).not.toBe(launches[0].name);
    expect((await readPool(pool)).slots).toMatchObject([{ status: "starting", machine_id: null }]);
    // The lost runner's machine token no longer works.
    expect((await claimAs(runner.token)).status).toBe(401);
  });

  it("a container whose runner never registers is replaced after MANAGED_SLOT_REGISTER_TIMEOUT_MS", async () => {
    await createPool({ name: "silent", min_instances: 1, max_instances: 1 });
    const start = Date.now();
    await tick(start);
    await tick(start + config.managedSlotRegisterTimeoutMs);
    expect(containers.launches(orgId)).toHaveLength(1);
    await tick(start + config.managedSlotRegisterTimeoutMs + 1);
    expect(containers.launches(orgId)).toHaveLength(2);
    // Its unused registration token was revoked with it.
    const [first] = containers.launches(orgId);
    const late = await call("POST", "/v1/runners/register", { token: first.registrationToken, body: { name: first.name, protocols: ["process"], cli_version: CLI_VERSION } });
    expect(late.status).toBe(401);
  });

  it("the organization's pools together never run more than MANAGED_INSTANCES_PER_ORG_MAX instances", async () => {
    await createPool({ name: "a", min_instances: 1, max_instances: 1 });
    await createPool({ name: "b", min_instances: 1, max_instances: 1 });
    await tick(Date.now(), { managedInstancesPerOrgMax: 1 });
    await tick(Date.now(), { managedInstancesPerOrgMax: 1 });
    expect(containers.launches(orgId)).toHaveLength(1);
  });

  it("a container started while its pool was being stopped or deleted is halted at the next tick", async () => {
    const stopped = await createPool({ name: "stopping", min_instances: 1, max_instances: 1 });
    const deleted = await createPool({ name: "deleting", min_instances: 1, max_instances: 1 });
    await tick(Date.now());
    expect(containers.running(orgId)).toHaveLength(2);
    // As a tick that read both pools as running would leave them: their rows changed, their slots still there.
    await env.DB.prepare("UPDATE managed_pools SET state = 'stopped' WHERE id = ?1").bind(stopped).run();
    await env.DB.prepare("DELETE FROM managed_pools WHERE id = ?1").bind(deleted).run();
    await tick(Date.now());
    expect(containers.running(orgId)).toEqual([]);
    expect((await readPool(stopped)).slots).toEqual([]);
    expect((await env.DB.prepare("SELECT count(*) AS n FROM managed_slots WHERE pool_id = ?1").bind(deleted).first<{ n: number }>())?.n).toBe(0);
  });

  it("without the MANAGED_RUNNER binding the scaler starts and halts nothing", async () => {
    const pool = await createPool({ name: "off", min_instances: 1, max_instances: 1 });
    removeContainers();
    await tick(Date.now());
    expect((await readPool(pool)).slots).toEqual([]);
    expect(containers.launches(orgId)).toEqual([]);
  });
});
