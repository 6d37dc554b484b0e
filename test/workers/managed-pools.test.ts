// Managed runner pools through the API (docs/managed-runners.md): an admin creates, changes,
// starts, stops and deletes them, a member reads them, bad input changes nothing, and a deployment
// without the MANAGED_RUNNER binding answers 501 managed_runners_unavailable instead of starting anything.

import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import { scalePools } from "../../src/managed/scaler";
import { callDirect as call } from "./direct";
import { createOrg, runBody } from "./helpers";
import { installFakeContainers, registerLaunched, removeContainers, type FakeContainers } from "./managed-fakes";

const config = loadConfig(env);
let containers: FakeContainers;
let orgId: string;
let admin: string;
let member: string;

beforeEach(async () => {
  containers = installFakeContainers();
  ({ orgId, admin } = await createOrg("pools"));
  member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
});

const createPool = (body: Record<string, unknown>, token = admin) => call("POST", "/v1/managed/pools", { token, body });
const listPools = async () => (await call("GET", "/v1/managed/pools", { token: admin })).body.pools as Record<string, any>[];

describe("managed pools", () => {
  it("an admin creates a pool that a member can list and read, with its idle time and estimated cost", async () => {
    const created = await createPool({ name: "gpu-pool", labels: ["gpu", "linux", "gpu"], min_instances: 1, max_instances: 3 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({
      name: "gpu-pool",
      labels: ["gpu", "linux"],
      min_instances: 1,
      max_instances: 3,
      idle_ms: config.managedPoolIdleMs,
      state: "running",
      slots: [],
      estimated_cost: { instance_hour_millicents: config.managedInstanceHourMillicents, running_hour_millicents: 0 },
    });
    const read = await call("GET", `/v1/managed/pools/${created.body.id}`, { token: member });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created.body);
    const list = await call("GET", "/v1/managed/pools", { token: member });
    expect(list.body.pools.map((p: any) => p.id)).toEqual([created.body.id]);
  });

  it("a member cannot create, change, start, stop or delete a pool (403 forbidden), and nothing changes", async () => {
    const pool = (await createPool({ name: "p", max_instances: 1 })).body;
    expect((await createPool({ name: "q", max_instances: 1 }, member)).status).toBe(403);
    for (const [method, path, body] of [
      ["PATCH", `/v1/managed/pools/${pool.id}`, { max_instances: 2 }],
      ["POST", `/v1/managed/pools/${pool.id}/stop`, {}],
      ["POST", `/v1/managed/pools/${pool.id}/start`, {}],
      ["DELETE", `/v1/managed/pools/${pool.id}`, undefined],
    ] as const) {
      const res = await call(method, path, { token: member, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error.code).toBe("forbidden");
    }
    expect(await listPools()).toEqual([pool]);
  });

  it("bad input is a 400 naming the field, and creates or changes nothing", async () => {
    const refusals: [Record<string, unknown>, string][] = [
      [{ name: "p", min_instances: 3, max_instances: 2 }, "min_instances"],
      [{ name: "p", max_instances: config.managedInstancesPerOrgMax + 1 }, "max_instances"],
      [{ name: "p", max_instances: 0 }, "max_instances"],
      [{ name: "has space", max_instances: 1 }, "name"],
      [{ name: "p", max_instances: 1, labels: ["no spaces"] }, "labels.0"],
      [{ name: "p", max_instances: 1, idle_ms: config.managedPoolIdleMaxMs + 1 }, "idle_ms"],
      [{ name: "p", max_instances: 1, machine: "x" }, "body"],
    ];
    for (const [body, field] of refusals) {
      const res = await createPool(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field });
    }
    expect(await listPools()).toEqual([]);
    const pool = (await createPool({ name: "p", min_instances: 1, max_instances: 2 })).body;
    const res = await call("PATCH", `/v1/managed/pools/${pool.id}`, { token: admin, body: { max_instances: 1, min_instances: 2 } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "min_instances" });
    expect(await listPools()).toEqual([pool]);
  });

  it("a second pool of the same name is 409 managed_pool_exists, and one past MANAGED_POOLS_PER_ORG_MAX is 409 managed_pool_limit", async () => {
    expect((await createPool({ name: "p", max_instances: 1 })).status).toBe(201);
    const again = await createPool({ name: "p", max_instances: 2 });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "managed_pool_exists", field: "name" });
    for (let i = 1; i < config.managedPoolsPerOrgMax; i++) expect((await createPool({ name: `p${i}`, max_instances: 1 })).status).toBe(201);
    const past = await createPool({ name: "one-too-many", max_instances: 1 });
    expect(past.status).toBe(409);
    expect(past.body.error).toMatchObject({ code: "managed_pool_limit", limit: config.managedPoolsPerOrgMax });
    expect(await listPools()).toHaveLength(config.managedPoolsPerOrgMax);
  });

  it("concurrent creations never take the organization past MANAGED_POOLS_PER_ORG_MAX", async () => {
    for (let i = 1; i < config.managedPoolsPerOrgMax; i++) expect((await createPool({ name: `p${i}`, max_instances: 1 })).status).toBe(201);
    const racing = await Promise.all(["a", "b", "c", "d", "e"].map((name) => createPool({ name, max_instances: 1 })));
    expect(racing.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    expect(await listPools()).toHaveLength(config.managedPoolsPerOrgMax);
  });

  it("an admin changes only the fields sent, and idle_ms null goes back to the default", async () => {
    const pool = (await createPool({ name: "p", labels: ["a"], max_instances: 2, idle_ms: 60_000 })).body;
    expect(pool.idle_ms).toBe(60_000);
    const changed = await call("PATCH", `/v1/managed/pools/${pool.id}`, { token: admin, body: { min_instances: 1, labels: ["b"] } });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ labels: ["b"], min_instances: 1, max_instances: 2, idle_ms: 60_000 });
    const reset = await call("PATCH", `/v1/managed/pools/${pool.id}`, { token: admin, body: { idle_ms: null } });
    expect(reset.body.idle_ms).toBe(config.managedPoolIdleMs);
  });

  it("stopping a pool halts its containers and deregisters their runners; starting it lets it scale again", async () => {
    const pool = (await createPool({ name: "p", min_instances: 1, max_instances: 1 })).body;
    await scalePools(env, config, Date.now());
    const launch = containers.launches(orgId)[0];
    const runner = await registerLaunched(launch);
    const stopped = await call("POST", `/v1/managed/pools/${pool.id}/stop`, { token: admin, body: {} });
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({ state: "stopped", slots: [] });
    expect(containers.running(orgId)).toEqual([]);
    const runners = (await call("GET", "/v1/runners", { token: admin })).body.runners;
    expect(runners.map((r: any) => r.id)).not.toContain(runner.machineId);
    // A stopped pool starts nothing, whatever its minimum.
    await scalePools(env, config, Date.now());
    expect(containers.launches(orgId)).toHaveLength(1);
    const started = await call("POST", `/v1/managed/pools/${pool.id}/start`, { token: admin, body: {} });
    expect(started.body.state).toBe("running");
    await scalePools(env, config, Date.now());
    expect(containers.launches(orgId)).toHaveLength(2);
  });

  it("deleting a pool halts its containers and the pool is gone", async () => {
    const pool = (await createPool({ name: "p", min_instances: 1, max_instances: 1 })).body;
    await scalePools(env, config, Date.now());
    expect(containers.running(orgId)).toHaveLength(1);
    const deleted = await call("DELETE", `/v1/managed/pools/${pool.id}`, { token: admin });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ id: pool.id, state: "stopped", slots: [] });
    expect(containers.running(orgId)).toEqual([]);
    expect((await call("GET", `/v1/managed/pools/${pool.id}`, { token: admin })).status).toBe(404);
  });

  it("another organization's pool is not found, and is left as it was", async () => {
    const pool = (await createPool({ name: "p", max_instances: 1 })).body;
    const other = (await createOrg("other")).admin;
    for (const [method, path] of [["GET", ""], ["PATCH", ""], ["POST", "/stop"], ["DELETE", ""]] as const) {
      const res = await call(method, `/v1/managed/pools/${pool.id}${path}`, { token: other, body: method === "PATCH" ? { max_instances: 2 } : method === "POST" ? {} : undefined });
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    expect((await call("GET", "/v1/managed/pools", { token: other })).body.pools).toEqual([]);
    expect(await listPools()).toEqual([pool]);
  });

  it("a run no connected runner covers names the running pool whose runners would, in the run and in the queue; a stopped pool or another's labels are not named", async () => {
    const pool = (await createPool({ name: "gpu-pool", labels: ["gpu"], max_instances: 2 })).body;
    await createPool({ name: "arm-pool", labels: ["arm"], max_instances: 1, state: "stopped" });
    const gpu = (await call("POST", "/v1/runs", { token: admin, body: runBody({ labels: ["gpu"] }) })).body.id;
    const arm = (await call("POST", "/v1/runs", { token: admin, body: runBody({ labels: ["arm"] }) })).body.id;
    const waiting = (await call("GET", `/v1/runs/${gpu}`, { token: admin })).body.waiting;
    expect(waiting).toMatchObject({ reason: "no_runner", detail: { managed_pool: pool.id, connected_runners: 0 } });
    expect(waiting.detail.message).toContain("the managed pool gpu-pool covers it, and starts a runner for it at a cron tick");
    const armWaiting = (await call("GET", `/v1/runs/${arm}`, { token: admin })).body.waiting;
    expect(armWaiting.reason).toBe("no_runner");
    expect(armWaiting.detail).not.toHaveProperty("managed_pool");
    const queue = (await call("GET", "/v1/queue", { token: admin })).body.runs as Record<string, any>[];
    expect(queue.find((r) => r.id === gpu)!.waiting.detail.managed_pool).toBe(pool.id);
    expect(queue.find((r) => r.id === arm)!.waiting.detail).not.toHaveProperty("managed_pool");
    // Once the pool's runner is connected, the run is its: it waits for that runner's claim, not for a runner.
    await scalePools(env, config, Date.now());
    await registerLaunched(containers.launches(orgId)[0]);
    expect((await call("GET", `/v1/runs/${gpu}`, { token: admin })).body.waiting.reason).toBe("next_in_queue");
  });

  it("without the MANAGED_RUNNER binding, creating or starting a pool is 501 managed_runners_unavailable; reading, stopping and deleting still work", async () => {
    const pool = (await createPool({ name: "p", max_instances: 1, state: "stopped" })).body;
    removeContainers();
    const created = await createPool({ name: "q", max_instances: 1 });
    expect(created.status).toBe(501);
    expect(created.body.error).toMatchObject({ code: "managed_runners_unavailable", binding: "MANAGED_RUNNER" });
    const started = await call("POST", `/v1/managed/pools/${pool.id}/start`, { token: admin, body: {} });
    expect(started.status).toBe(501);
    expect(await listPools()).toEqual([pool]);
    expect((await call("POST", `/v1/managed/pools/${pool.id}/stop`, { token: admin, body: {} })).status).toBe(200);
    expect((await call("DELETE", `/v1/managed/pools/${pool.id}`, { token: admin })).status).toBe(200);
  });
});
