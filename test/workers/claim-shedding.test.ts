// A full scheduler sheds load: past CLAIM_WAITERS_MAX waiting long-polls, a claim that finds no
// work is 429 too_many_waiters with Retry-After, never an instant 204 that runners re-ask at once
// (docs/protocol.md, "Runner protocol").

import { describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import { call, CLI_VERSION, createOrg, dispatch, registerRunner, setSchedulerConfig } from "./helpers";

/** The organization's scheduler, made to hold at most `max` waiters (as CLAIM_WAITERS_MAX would). */
async function limitWaiters(orgId: string, max: number): Promise<void> {
  await setSchedulerConfig(orgId, { claimWaitersMax: max });
}

const claimBody = (waitMs: number) => ({ cli_version: CLI_VERSION, protocols: ["process"], wait_ms: waitMs });

describe("claim long-poll shedding", () => {
  it("past CLAIM_WAITERS_MAX waiters, a claim is 429 too_many_waiters with Retry-After; the waiter already held still gets work", async () => {
    const { orgId, admin } = await createOrg("shed");
    const first = await registerRunner(admin, { name: "first" });
    const second = await registerRunner(admin, { name: "second" });
    await limitWaiters(orgId, 1);

    const waiting = call("POST", "/v1/runners/claim", { token: first.token, body: claimBody(1_000) });
    // Let the first long-poll register as the one waiter.
    await new Promise((r) => setTimeout(r, 100));
    const refused = await call("POST", "/v1/runners/claim", { token: second.token, body: claimBody(1_000) });
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: "too_many_waiters", limit: 1, retry_after_ms: DEFAULTS.claimWaitersRetryAfterMs });
    expect(refused.headers.get("Retry-After")).toBe(String(Math.ceil(DEFAULTS.claimWaitersRetryAfterMs / 1_000)));

    const runId = await dispatch(admin);
    const granted = await waiting;
    expect(granted.status).toBe(200);
    expect(granted.body.run_id).toBe(runId);
  });

  it("a full scheduler still hands out work that is there: shedding only refuses a claim with nothing to give", async () => {
    const { orgId, admin } = await createOrg("shed-work");
    const first = await registerRunner(admin, { name: "first" });
    const second = await registerRunner(admin, { name: "second" });
    await limitWaiters(orgId, 0);
    const runId = await dispatch(admin);
    const granted = await call("POST", "/v1/runners/claim", { token: second.token, body: claimBody(1_000) });
    expect(granted.status).toBe(200);
    expect(granted.body.run_id).toBe(runId);
    const refused = await call("POST", "/v1/runners/claim", { token: first.token, body: claimBody(1_000) });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("too_many_waiters");
  });

  it("under the limit, a claim with nothing to give is still 204 after its wait", async () => {
    const { admin } = await createOrg("shed-none");
    const runner = await registerRunner(admin);
    const started = Date.now();
    const res = await call("POST", "/v1/runners/claim", { token: runner.token, body: claimBody(300) });
    expect(res.status).toBe(204);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });
});
