// The dashboard's "Managed runners" page (docs/managed-runners.md): pools with their slots, machines,
// state and estimated cost; an admin creates, resizes, starts, stops and deletes them through the
// API, stopping and deleting only with the confirmation ticked; a member only reads.

import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import { scalePools } from "../../src/managed/scaler";
import { page, signIn } from "./dashboard-helpers";
import { call, CLI_VERSION, createOrg, setSchedulerConfig, untilClaimWaits } from "./helpers";
import { installFakeContainers, registerLaunched, type FakeContainers } from "./managed-fakes";

const config = loadConfig(env);
let containers: FakeContainers;
let orgId: string;
let admin: string;

beforeEach(async () => {
  containers = installFakeContainers();
  ({ orgId, admin } = await createOrg("console"));
});

const pools = async () => (await call("GET", "/v1/managed/pools", { token: admin })).body.pools as Record<string, any>[];

describe("the Managed runners page", () => {
  it("an admin creates a pool from the page, and sees its slots, their machines, its state and estimated cost", async () => {
    const session = await signIn(admin);
    const empty = await page("/dash/managed", { cookie: session });
    expect(empty.status).toBe(200);
    expect(empty.text).toContain("No managed pool is configured.");
    const created = await page("/dash/managed/pools", { cookie: session, form: { name: "builders", labels: "gpu, linux", min_instances: "1", max_instances: "2", idle_minutes: "5" } });
    expect(created.status).toBe(303);
    expect(created.headers.get("Location")).toBe("/dash/managed?done=pool+created");
    const [pool] = await pools();
    expect(pool).toMatchObject({ name: "builders", labels: ["gpu", "linux"], min_instances: 1, max_instances: 2, idle_ms: 300_000, state: "running" });
    await scalePools(env, config, Date.now());
    const runner = await registerLaunched(containers.launches(orgId)[0]);
    await scalePools(env, config, Date.now());
    const shown = (await page("/dash/managed?done=pool+created", { cookie: session })).text;
    expect(shown).toContain("Done: pool created.");
    expect(shown).toContain("<h2>builders</h2>");
    expect(shown).toContain(`href="/dash/runners/${runner.machineId}"`);
    // The slots are a DataTable: a table on a wide window, a card per slot on a phone, its status a word.
    expect(shown).toContain(`<div class="table-wrap"><table id="slots-${pool.id}" class="cards">`);
    expect(shown).toContain('<tr data-slot="0"><td data-label="Slot">0</td><td data-label="Status" class="state"><span class="ok">connected</span></td>');
    expect(shown).toContain(`<td data-label="Machine"><a href="/dash/runners/${runner.machineId}">`);
    expect(shown).toContain(`$${(config.managedInstanceHourMillicents / 100_000).toFixed(3)}/h now`);
  });

  it("an admin resizes and starts a pool; stopping or deleting it needs the confirmation box, and without it nothing changes", async () => {
    const session = await signIn(admin);
    await page("/dash/managed/pools", { cookie: session, form: { name: "p", min_instances: "1", max_instances: "1" } });
    const [pool] = await pools();
    await scalePools(env, config, Date.now());
    expect(containers.running(orgId)).toHaveLength(1);
    const resized = await page(`/dash/managed/pools/${pool.id}/update`, { cookie: session, form: { min_instances: "0", max_instances: "3" } });
    expect(resized.status).toBe(303);
    expect((await pools())[0]).toMatchObject({ min_instances: 0, max_instances: 3 });
    const unconfirmed = await page(`/dash/managed/pools/${pool.id}/stop`, { cookie: session, form: {} });
    expect(unconfirmed.status).toBe(400);
    expect(unconfirmed.text).toContain("Tick the confirmation box");
    expect((await pools())[0].state).toBe("running");
    expect(containers.running(orgId)).toHaveLength(1);
    expect((await page(`/dash/managed/pools/${pool.id}/stop`, { cookie: session, form: { confirm: "yes" } })).status).toBe(303);
    expect((await pools())[0]).toMatchObject({ state: "stopped", slots: [] });
    expect(containers.running(orgId)).toEqual([]);
    expect((await page(`/dash/managed/pools/${pool.id}/start`, { cookie: session, form: {} })).status).toBe(303);
    expect((await pools())[0].state).toBe("running");
    expect((await page(`/dash/managed/pools/${pool.id}/delete`, { cookie: session, form: {} })).status).toBe(400);
    expect(await pools()).toHaveLength(1);
    expect((await page(`/dash/managed/pools/${pool.id}/delete`, { cookie: session, form: { confirm: "yes" } })).status).toBe(303);
    expect(await pools()).toEqual([]);
  });

  it("once the pool halts an idle container, the page still says which slot and machine stopped, when and why", async () => {
    const session = await signIn(admin);
    await page("/dash/managed/pools", { cookie: session, form: { name: "brief", min_instances: "1", max_instances: "1", idle_minutes: "1" } });
    const [pool] = await pools();
    const start = Date.now();
    await scalePools(env, config, start);
    const runner = await registerLaunched(containers.launches(orgId)[0]);
    await page(`/dash/managed/pools/${pool.id}/update`, { cookie: session, form: { min_instances: "0", max_instances: "1" } });
    // Its runner waits on a claim through a tick past the pool's idle time: the scheduler lets it wait
    // a minute (the tests' CLAIM_WAIT_MS is 1 s, shorter than a tick on a loaded machine).
    await setSchedulerConfig(orgId, { claimWaitMs: 60_000 });
    const waiting = call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: 60_000 } });
    await untilClaimWaits(orgId);
    await scalePools(env, config, start + 60_000);
    // The halt deregistered its machine, which ended the claim still waiting (however slow the tick).
    expect((await waiting).status).toBe(401);
    expect((await pools())[0]).toMatchObject({ slots: [], last_halt: { slot: 0, machine_id: runner.machineId, reason: "its runner took no run for the pool's idle time", at_ms: start + 60_000 } });
    const shown = (await page("/dash/managed", { cookie: session })).text;
    expect(shown).toContain(`Last stopped: slot 0 (${containers.launches(orgId)[0].name}, machine ${runner.machineId}) at`);
    expect(shown).toContain("its runner took no run for the pool&#39;s idle time.");
  });

  it("a bad form is the API's refusal naming the field, and a cross-site form is refused; neither creates a pool", async () => {
    const session = await signIn(admin);
    const bad = await page("/dash/managed/pools", { cookie: session, form: { name: "p", min_instances: "3", max_instances: "2" } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("min_instances");
    const forged = await page("/dash/managed/pools", { cookie: session, form: { name: "p", max_instances: "1" }, origin: "https://evil.example" });
    expect(forged.status).toBe(403);
    expect(await pools()).toEqual([]);
  });

  it("a member sees the pools but is offered no form, and the API refuses one sent anyway", async () => {
    await call("POST", "/v1/managed/pools", { token: admin, body: { name: "p", max_instances: 1 } });
    const [pool] = await pools();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const session = await signIn(member);
    const shown = (await page("/dash/managed", { cookie: session })).text;
    expect(shown).toContain("<h2>p</h2>");
    expect(shown).not.toContain("<form method=\"post\" action=\"/dash/managed/pools\"");
    expect(shown).not.toContain(`/dash/managed/pools/${pool.id}/`);
    const refused = await page(`/dash/managed/pools/${pool.id}/delete`, { cookie: session, form: { confirm: "yes" } });
    expect(refused.status).toBe(403);
    expect(await pools()).toHaveLength(1);
  });
});
