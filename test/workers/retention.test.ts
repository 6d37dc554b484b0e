// Bounded storage: idempotency keys expire after IDEMPOTENCY_KEY_TTL_MS, and the stored events of
// runs that ended more than EVENT_RETENTION_MS ago are pruned (src/retention.ts,
// durable-objects/outbox.ts), each by bounded batches; a read inside the retention is unchanged.

import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import worker from "../../src/index";
import { pruneStorage } from "../../src/retention";
import { call, createOrg, runBody } from "./helpers";

const config = loadConfig(env);
const DAY_MS = 86_400_000;

async function tick(atMs: number): Promise<void> {
  await worker.scheduled(createScheduledController({ scheduledTime: atMs, cron: "* * * * *" }), env);
}

function dispatchWithKey(admin: string, key: string, overrides = {}) {
  return call("POST", "/v1/runs", { token: admin, body: runBody(overrides), headers: { "Idempotency-Key": key } });
}

/** Makes a stored key look `ms` older, as if it had been used that long ago. */
async function ageKey(key: string, ms: number): Promise<void> {
  await env.DB.prepare("UPDATE idempotency_keys SET created_at_ms = created_at_ms - ? WHERE key = ?").bind(ms, key).run();
}

async function keyCount(prefix: string): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS n FROM idempotency_keys WHERE key LIKE ?").bind(`${prefix}%`).first<{ n: number }>();
  return row!.n;
}

describe("Idempotency-Key window", () => {
  it("the default window is 24 hours", () => {
    expect(config.idempotencyKeyTtlMs).toBe(DAY_MS);
  });

  it("a replay just inside the window answers the first run (200)", async () => {
    const { admin } = await createOrg();
    const first = await dispatchWithKey(admin, "inside-window");
    expect(first.status).toBe(201);
    await ageKey("inside-window", config.idempotencyKeyTtlMs - 60_000);
    const again = await dispatchWithKey(admin, "inside-window");
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    // A different payload inside the window is still a conflict.
    const other = await dispatchWithKey(admin, "inside-window", { brief: "something else" });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe("idempotency_conflict");
  });

  it("after the window the same key creates a new run (201), which later replays", async () => {
    const { admin } = await createOrg();
    const first = await dispatchWithKey(admin, "past-window");
    await ageKey("past-window", config.idempotencyKeyTtlMs + 1);
    const fresh = await dispatchWithKey(admin, "past-window", { brief: "a new payload is fine too" });
    expect(fresh.status).toBe(201);
    expect(fresh.body.id).not.toBe(first.body.id);
    const replay = await dispatchWithKey(admin, "past-window", { brief: "a new payload is fine too" });
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(fresh.body.id);
  });

  it("the cron tick deletes expired keys in bounded batches and keeps the live ones", async () => {
    const { admin } = await createOrg();
    for (let i = 0; i < 5; i++) await dispatchWithKey(admin, `prune-old-${i}`);
    await dispatchWithKey(admin, "prune-live");
    for (let i = 0; i < 5; i++) await ageKey(`prune-old-${i}`, config.idempotencyKeyTtlMs + 1);
    const now = Date.now();
    const first = await pruneStorage(env.DB, { ...config, pruneBatchMax: 3 }, now);
    expect(first?.idempotency_keys).toBe(3);
    expect(await keyCount("prune-old-")).toBe(2);
    await tick(now);
    expect(await keyCount("prune-old-")).toBe(0);
    expect(await keyCount("prune-live")).toBe(1);
    expect((await dispatchWithKey(admin, "prune-live")).status).toBe(200);
  });
});
