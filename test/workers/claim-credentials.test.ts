// A claim's credentials as its organization's scheduler keeps them (durable-objects/claim-credentials.ts):
// a deregistration is never missed, not even by a read that was on its way when it was told, and a
// recovery that starts holds claims although the sweep row kept said none was under way.

import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { ClaimCredentialsCache } from "../../durable-objects/claim-credentials";
import { loadConfig } from "../../src/config";
import { deregisterMachine } from "../../src/credentials/machines";
import { sha256Hex } from "../../src/lib/crypto";
import { noCost } from "../../src/lib/cost";
import { createOrg, registerRunner, sleep } from "./helpers";

const config = loadConfig(env);

async function machineOfNewOrg() {
  const { orgId, admin } = await createOrg();
  const runner = await registerRunner(admin, { labels: ["linux"] });
  return { orgId, machineId: runner.machineId as string, hash: await sha256Hex(runner.token) };
}

async function writeSweep(lastTickAtMs: number, recoveredAtMs: number) {
  await env.DB.prepare("INSERT OR REPLACE INTO sweep (id, last_tick_at_ms, recovered_at_ms, recovery_done_at_ms) VALUES (1, ?, ?, 0)")
    .bind(lastTickAtMs, recoveredAtMs)
    .run();
}

beforeEach(async () => {
  await env.DB.prepare("DELETE FROM sweep").run();
});

describe("claim credentials kept by the scheduler", () => {
  it("a verified token answers without a D1 row, and is refused at once after its machine is deregistered", async () => {
    const { orgId, machineId, hash } = await machineOfNewOrg();
    const credentials = new ClaimCredentialsCache(env.DB, config);
    const first = noCost();
    expect(await credentials.check(orgId, hash, first)).toMatchObject({ machine: { machineId, labels: ["linux"] } });
    expect(first.d1RowsRead).toBeGreaterThan(0);
    const again = noCost();
    expect(await credentials.check(orgId, hash, again)).toMatchObject({ machine: { machineId } });
    expect(again.d1RowsRead).toBe(0);

    await deregisterMachine(env.DB, orgId, machineId, Date.now());
    credentials.forget(machineId);
    expect(await credentials.check(orgId, hash, noCost())).toMatchObject({ error: { code: "unauthorized", reason: "machine_deregistered" } });
  });

  it("a read on its way when a deregistration is told serves its one claim and is not kept", async () => {
    const { orgId, machineId, hash } = await machineOfNewOrg();
    const credentials = new ClaimCredentialsCache(env.DB, config);
    const onItsWay = credentials.check(orgId, hash, noCost());
    credentials.forget(machineId);
    await deregisterMachine(env.DB, orgId, machineId, Date.now());
    expect(await onItsWay).toMatchObject({ machine: { machineId } });
    expect(await credentials.check(orgId, hash, noCost())).toMatchObject({ error: { reason: "machine_deregistered" } });
  });

  it("another organization's token, or one never issued, is refused", async () => {
    const { hash } = await machineOfNewOrg();
    const other = await createOrg("other");
    const credentials = new ClaimCredentialsCache(env.DB, config);
    expect(await credentials.check(other.orgId, hash, noCost())).toMatchObject({ error: { code: "unauthorized" } });
    expect(await credentials.check(other.orgId, "0".repeat(64), noCost())).toMatchObject({ error: { code: "unauthorized" } });
  });

  it("the sweep row kept is read again after CLAIM_SWEEP_TTL_MS: a recovery that started meanwhile holds the claim", async () => {
    const { orgId, hash } = await machineOfNewOrg();
    const credentials = new ClaimCredentialsCache(env.DB, config);
    await writeSweep(Date.now(), 0);
    expect(await credentials.check(orgId, hash, noCost())).toHaveProperty("machine");
    await writeSweep(Date.now(), Date.now()); // a deploy's tick started a recovery
    await sleep(config.claimSweepTtlMs);
    expect(await credentials.check(orgId, hash, noCost())).toMatchObject({ held: expect.stringContaining("reconciled") });
  });

  it("a kept sweep row whose last tick grows older than the outage threshold is read again at once, however long it may be kept", async () => {
    const { orgId, hash } = await machineOfNewOrg();
    const credentials = new ClaimCredentialsCache(env.DB, { ...config, claimSweepTtlMs: 3_600_000 });
    await writeSweep(Date.now() - config.sweepOutageThresholdMs + 300, 0);
    expect(await credentials.check(orgId, hash, noCost())).toHaveProperty("machine");
    // Past the threshold the row kept would hold the claim; the row read again says a tick came and a recovery is under way.
    await writeSweep(Date.now(), Date.now());
    await sleep(400);
    const cost = noCost();
    expect(await credentials.check(orgId, hash, cost)).toMatchObject({ held: expect.stringContaining("being reconciled") });
    expect(cost.d1RowsRead).toBe(1);
  });
});
