// Rate limits (docs/protocol.md, "Rate limits"): per member token, per runner token, and failed
// authentication per address, each 429 rate_limited with Retry-After past its limit, and none
// touching another token or address. The Worker is called with the low RATE_LIMIT_TEST_*
// bindings of vitest.config.ts (5 calls a minute) in place of the real ones.

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import worker from "../../src/index";
import { call, CLI_VERSION, createOrg, registerRunner } from "./helpers";

const LIMIT = 5;

const lowEnv = () => ({
  ...env,
  RATE_LIMIT_ADDRESS: env.RATE_LIMIT_TEST_ADDRESS,
  RATE_LIMIT_MEMBER: env.RATE_LIMIT_TEST_MEMBER,
  RATE_LIMIT_RUNNER: env.RATE_LIMIT_TEST_RUNNER,
});

async function limited(method: string, path: string, opts: { token?: string; body?: unknown; address?: string } = {}) {
  const headers: Record<string, string> = {};
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  if (opts.address) headers["CF-Connecting-IP"] = opts.address;
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const request = new Request(`http://docket.test${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const ctx = createExecutionContext();
  const res = await worker.fetch(request, lowEnv(), ctx);
  await waitOnExecutionContext(ctx);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
}

/**
 * Calls until the first 429, at most 3 × LIMIT times. The binding counts in fixed windows, so a
 * window that turns over midway lets up to LIMIT more through: the 429 still comes, after at
 * least LIMIT answers that were not refused.
 */
async function callUntilLimited(send: () => ReturnType<typeof limited>) {
  const statuses: number[] = [];
  for (let i = 0; i < 3 * LIMIT; i++) {
    const res = await send();
    statuses.push(res.status);
    if (res.status === 429) return { refused: res, before: statuses.slice(0, -1) };
  }
  throw new Error(`never limited: ${statuses.join(",")}`);
}

function expectRateLimited(res: Awaited<ReturnType<typeof limited>>, limit: string) {
  expect(res.status).toBe(429);
  expect(res.body.error).toMatchObject({ code: "rate_limited", limit, retry_after_ms: DEFAULTS.rateLimitRetryAfterMs });
  expect(res.headers.get("Retry-After")).toBe(String(DEFAULTS.rateLimitRetryAfterMs / 1_000));
}

let admin: string;
let otherMember: string;

beforeAll(async () => {
  admin = (await createOrg("limits")).admin;
  otherMember = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
});

describe("rate limits", () => {
  it("a member token past its limit gets 429 rate_limited with Retry-After; another member token is unaffected", async () => {
    const { refused, before } = await callUntilLimited(() => limited("GET", "/v1/runs", { token: admin }));
    expect(before.length).toBeGreaterThanOrEqual(LIMIT);
    expect(before.every((s) => s === 200)).toBe(true);
    expectRateLimited(refused, "member");
    expect((await limited("GET", "/v1/runs", { token: otherMember })).status).toBe(200);
  });

  it("a dispatch past the member limit creates no run", async () => {
    const { admin: member } = await createOrg("limits-dispatch");
    const body = { brief: "x", launch: { command: ["node"] } };
    const { refused, before } = await callUntilLimited(() => limited("POST", "/v1/runs", { token: member, body }));
    expectRateLimited(refused, "member");
    const runs = (await call("GET", "/v1/runs?limit=200", { token: member })).body.runs;
    expect(runs).toHaveLength(before.filter((s) => s === 201).length);
  });

  it("a machine token past its limit gets 429 rate_limited; another machine of the organization still claims", async () => {
    const first = await registerRunner(admin, { name: "busy" });
    const second = await registerRunner(admin, { name: "quiet" });
    const body = { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: 0 };
    const { refused, before } = await callUntilLimited(() => limited("POST", "/v1/runners/claim", { token: first.token, body }));
    expect(before.length).toBeGreaterThanOrEqual(LIMIT);
    expect(before.every((s) => s === 204)).toBe(true);
    expectRateLimited(refused, "runner");
    expect((await limited("POST", "/v1/runners/claim", { token: second.token, body })).status).toBe(204);
  });

  it("failed authentications from one address become 429 rate_limited; other addresses still get 401, and a valid token from it still works", async () => {
    const address = `192.0.2.${Math.floor(Math.random() * 250) + 1}`;
    const guess = `dkt_m_${"0".repeat(64)}`;
    const { refused, before } = await callUntilLimited(() => limited("GET", "/v1/runs", { token: guess, address }));
    expect(before.length).toBeGreaterThanOrEqual(LIMIT);
    expect(before.every((s) => s === 401)).toBe(true);
    expectRateLimited(refused, "address");
    expect((await limited("GET", "/v1/runs", { token: guess, address: "198.51.100.7" })).status).toBe(401);
    expect((await limited("GET", "/v1/runs", { token: otherMember, address })).status).toBe(200);
  });

  it("a daemon's run-attempt token past the runner limit gets 429 rate_limited on its reports", async () => {
    const { admin: member } = await createOrg("limits-reports");
    const runner = await registerRunner(member);
    await call("POST", "/v1/runs", { token: member, body: { brief: "x", launch: { command: ["node"] } } });
    const granted = (await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: 0 } })).body;
    await call("POST", `/v1/runs/${granted.run_id}/attempts/1/launched`, { token: runner.token, body: { sandbox_id: "s" } });
    const { refused, before } = await callUntilLimited(() => limited("POST", `/v1/runs/${granted.run_id}/reports`, { token: granted.attempt_token, body: { phase: "implementing" } }));
    expect(before.length).toBeGreaterThanOrEqual(LIMIT);
    expect(before.every((s) => s === 200)).toBe(true);
    expectRateLimited(refused, "runner");
  });

  it("under the test configuration's real bindings, a hundred calls from one token are never limited", async () => {
    for (let i = 0; i < 100; i++) expect((await call("GET", "/v1/runs?limit=1", { token: otherMember })).status).toBe(200);
  });
});
