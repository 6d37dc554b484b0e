// Managed pools with real containers on the local Docker engine (docs/managed-runners.md,
// "Scaling"): a pool created through the API and moved by the scaler starts a container for queued
// work, which completes the run and is halted once idle; a killed container is noticed as any
// runner is (its machine goes silent) and replaced while the pool is below its minimum.

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, describe, expect, it } from "vitest";
import type { ManagedRunner } from "../../durable-objects/managed-runner";
import { loadConfig } from "../../src/config";
import { scalePools } from "../../src/managed/scaler";
import { call, createOrg, untilClaimWaits } from "../workers/helpers";
import { AGENT, containersEngine, managedRunner, waitFor } from "./helpers";

const engine = containersEngine("managed pool tests");
const config = loadConfig(env);
const tick = (nowMs = Date.now()) => scalePools(env, config, nowMs);

type Json = Record<string, any>;
const readPool = async (admin: string, id: string): Promise<Json> => (await call("GET", `/v1/managed/pools/${id}`, { token: admin })).body;
const runners = async (admin: string): Promise<Json[]> => (await call("GET", "/v1/runners", { token: admin })).body.runners;

/** Every pool a test made, stopped at the end so no container outlives the file. */
const made: { admin: string; id: string }[] = [];

async function createPool(admin: string, body: Json): Promise<string> {
  const res = await call("POST", "/v1/managed/pools", { token: admin, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  made.push({ admin, id: res.body.id });
  return res.body.id;
}

describe.skipIf(!engine)("a managed pool with real containers", () => {
  afterAll(async () => {
    for (const { admin, id } of made) await call("POST", `/v1/managed/pools/${id}/stop`, { token: admin, body: {} });
  });

  it("scales up for queued work its labels cover, the container completes the run, and is halted once idle past the pool's idle time", async () => {
    const { orgId, admin } = await createOrg("pool-up-down");
    const pool = await createPool(admin, { name: "auto", labels: ["pooled"], min_instances: 0, max_instances: 1, idle_ms: 60_000 });
    await tick();
    expect((await readPool(admin, pool)).slots).toEqual([]);

    const dispatched = await call("POST", "/v1/runs", {
      token: admin,
      body: { brief: 'scope:\n- notes.txt\nacceptance:\n- ends with "done"', labels: ["pooled"], launch: { command: ["node", AGENT] } },
    });
    expect(dispatched.status).toBe(201);
    await tick();
    const [slot] = (await readPool(admin, pool)).slots;
    expect(slot.status).not.toBe("lost");
    const run = await waitFor("the run", async () => (await call("GET", `/v1/runs/${dispatched.body.id}`, { token: admin })).body, (r) => ["completed", "failed", "cancelled"].includes(r.state));
    expect(run.state).toBe("completed");

    // Before the next tick, the pool names the machine the container's runner registered as: an ordinary one.
    const connected = (await readPool(admin, pool)).slots[0];
    expect(connected).toMatchObject({ status: "connected", runner_name: slot.runner_name, machine_id: expect.stringMatching(/^mch_/) });
    await tick();
    expect(await runners(admin)).toEqual([expect.objectContaining({ id: connected.machine_id, name: slot.runner_name, labels: ["pooled"] })]);

    // Idle (its claim waits for work) past the idle time, within the connected window: halted, its machine deregistered.
    await untilClaimWaits(orgId);
    await tick(Date.now() + 61_000);
    expect(await readPool(admin, pool)).toMatchObject({ slots: [], last_halt: { slot: slot.slot, machine_id: connected.machine_id, reason: "its runner took no run for the pool's idle time" } });
    expect(await runners(admin)).toEqual([]);
    await waitFor("the container's stop", () => managedRunner(slot.instance_name).runnerState(), (s) => !s.running, 60_000);
  });

  it("a killed container's machine goes silent; the pool halts it and starts another while below its minimum", async () => {
    const { admin } = await createOrg("pool-replace");
    const pool = await createPool(admin, { name: "steady", labels: ["steady"], min_instances: 1, max_instances: 1 });
    await tick();
    const [first] = (await readPool(admin, pool)).slots;
    await waitFor("the first runner's registration", () => runners(admin), (list) => list.some((r) => r.name === first.runner_name));
    await tick();
    expect((await readPool(admin, pool)).slots[0]).toMatchObject({ status: "connected" });

    await runInDurableObject(managedRunner(first.instance_name), (instance: ManagedRunner) => instance.destroy());
    // Nothing heard from its machine for longer than RUNNER_CONNECTED_WINDOW_MS: lost, as any runner.
    await tick(Date.now() + config.runnerConnectedWindowMs + 1_000);
    const [second] = (await readPool(admin, pool)).slots;
    expect(second.runner_name).not.toBe(first.runner_name);
    expect((await runners(admin)).map((r) => r.name)).not.toContain(first.runner_name);
    await waitFor("the replacement's registration", () => runners(admin), (list) => list.some((r) => r.name === second.runner_name));
  });
});
