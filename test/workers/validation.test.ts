// Malformed input on any endpoint gets 400 invalid_request naming the field, never a 500, and
// changes nothing (../shared/DESIGN.md, "Protocol essentials").

import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_SECRET, call, claim, createOrg, dispatch, registerRunner } from "./helpers";

let admin = "";
let machine = "";
let registration = "";
let runId = "";
let attemptToken = "";

beforeAll(async () => {
  admin = (await createOrg()).admin;
  const runner = await registerRunner(admin);
  machine = runner.token;
  registration = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } })).body.token;
  runId = await dispatch(admin);
  attemptToken = (await claim(machine, 0)).body.attempt_token;
});

type Case = { name: string; method: string; path: () => string; token: () => string; body?: unknown; raw?: string; field: string };

const cases: Case[] = [
  { name: "orgs: name missing", method: "POST", path: () => "/v1/orgs", token: () => ADMIN_SECRET, body: {}, field: "name" },
  { name: "orgs: not JSON", method: "POST", path: () => "/v1/orgs", token: () => ADMIN_SECRET, raw: "{not json", field: "body" },
  { name: "tokens: unknown kind", method: "POST", path: () => "/v1/tokens", token: () => admin, body: { kind: "god" }, field: "kind" },
  { name: "tokens: a role on a registration token", method: "POST", path: () => "/v1/tokens", token: () => admin, body: { kind: "registration", role: "admin" }, field: "role" },
  { name: "tokens: unknown field", method: "POST", path: () => "/v1/tokens", token: () => admin, body: { kind: "member", extra: 1 }, field: "body" },
  { name: "runs: brief missing", method: "POST", path: () => "/v1/runs", token: () => admin, body: { launch: { command: ["x"] } }, field: "brief" },
  { name: "runs: command empty", method: "POST", path: () => "/v1/runs", token: () => admin, body: { brief: "b", launch: { command: [] } }, field: "launch.command" },
  { name: "runs: priority not a number", method: "POST", path: () => "/v1/runs", token: () => admin, body: { brief: "b", priority: "high", launch: { command: ["x"] } }, field: "priority" },
  { name: "runs: a launch protocol this deployment does not hand out", method: "POST", path: () => "/v1/runs", token: () => admin, body: { brief: "b", launch: { protocol: "ssh", command: ["x"] } }, field: "launch.protocol" },
  { name: "runs: body is an array", method: "POST", path: () => "/v1/runs", token: () => admin, raw: "[]", field: "body" },
  { name: "runs: bad label", method: "POST", path: () => "/v1/runs", token: () => admin, body: { brief: "b", labels: ["a b"], launch: { command: ["x"] } }, field: "labels.0" },
  { name: "runs list: bad state", method: "GET", path: () => "/v1/runs?state=sleeping", token: () => admin, field: "state" },
  { name: "runs list: bad limit", method: "GET", path: () => "/v1/runs?limit=0", token: () => admin, field: "limit" },
  { name: "runs list: bad cursor", method: "GET", path: () => "/v1/runs?cursor=zzz", token: () => admin, field: "cursor" },
  { name: "run: bad id", method: "GET", path: () => "/v1/runs/not-a-run", token: () => admin, field: "id" },
  { name: "cancel: reason not a string", method: "POST", path: () => `/v1/runs/${runId}/cancel`, token: () => admin, body: { reason: 5 }, field: "reason" },
  { name: "events: bad cursor", method: "GET", path: () => `/v1/runs/${runId}/events?cursor=-1`, token: () => admin, field: "cursor" },
  { name: "events: after is not a page query key", method: "GET", path: () => `/v1/runs/${runId}/events?after=1`, token: () => admin, field: "query" },
  { name: "register: protocols missing", method: "POST", path: () => "/v1/runners/register", token: () => registration, body: { name: "x", cli_version: "1.0.0" }, field: "protocols" },
  { name: "heartbeat: cli_version wrong type", method: "POST", path: () => "/v1/runners/heartbeat", token: () => machine, body: { cli_version: 1, protocols: ["process"] }, field: "cli_version" },
  { name: "claim: wait_ms negative", method: "POST", path: () => "/v1/runners/claim", token: () => machine, body: { cli_version: "1.0.0", protocols: ["process"], wait_ms: -1 }, field: "wait_ms" },
  { name: "launched: sandbox_id missing", method: "POST", path: () => `/v1/runs/${runId}/attempts/1/launched`, token: () => machine, body: {}, field: "sandbox_id" },
  { name: "launched: attempt not a number", method: "POST", path: () => `/v1/runs/${runId}/attempts/one/launched`, token: () => machine, body: { sandbox_id: "s" }, field: "n" },
  { name: "lease: unknown field", method: "POST", path: () => `/v1/runs/${runId}/attempts/1/lease`, token: () => machine, body: { ttl: 5 }, field: "body" },
  { name: "launch-failed: error missing", method: "POST", path: () => `/v1/runs/${runId}/attempts/1/launch-failed`, token: () => machine, body: {}, field: "error" },
  { name: "stopped: not JSON", method: "POST", path: () => `/v1/runs/${runId}/attempts/1/stopped`, token: () => machine, raw: "stop", field: "body" },
  { name: "reports: bad outcome", method: "POST", path: () => `/v1/runs/${runId}/reports`, token: () => attemptToken, body: { final: { outcome: "maybe" } }, field: "final.outcome" },
  { name: "reports: lines not strings", method: "POST", path: () => `/v1/runs/${runId}/reports`, token: () => attemptToken, body: { lines: [1, 2] }, field: "lines.0" },
  { name: "reports: negative cost", method: "POST", path: () => `/v1/runs/${runId}/reports`, token: () => attemptToken, body: { final: { outcome: "completed", cost_cents: -3 } }, field: "final.cost_cents" },
];

describe("malformed input", () => {
  for (const c of cases) {
    it(`${c.name}: 400 invalid_request naming ${c.field}, nothing changed`, async () => {
      const before = await snapshot();
      const res = await call(c.method, c.path(), { token: c.token(), body: c.body, rawBody: c.raw });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(res.body.error.field).toBe(c.field);
      expect(res.body.error.message).toContain(c.field === "body" ? "" : c.field);
      expect(await snapshot()).toEqual(before);
    });
  }

  it("an Idempotency-Key with spaces is refused, naming the header", async () => {
    const res = await call("POST", "/v1/runs", { token: admin, body: { brief: "b", launch: { command: ["x"] } }, headers: { "Idempotency-Key": "a b" } });
    expect(res.status).toBe(400);
    expect(res.body.error.field).toBe("Idempotency-Key");
  });

  it("an empty body under Content-Type: application/json counts as {}: a body that needs fields names the first missing one", async () => {
    const before = await snapshot();
    const res = await call("POST", "/v1/runs", { token: admin, rawBody: "", headers: { "Content-Type": "application/json" } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "brief" });
    expect(await snapshot()).toEqual(before);
  });

  it("an empty body under Content-Type: application/json counts as {}: a cancel without a body cancels", async () => {
    const queued = await dispatch(admin);
    const res = await call("POST", `/v1/runs/${queued}/cancel`, { token: admin, rawBody: "", headers: { "Content-Type": "application/json" } });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("cancelled");
  });

  it("an unknown path is a structured 404", async () => {
    const res = await call("GET", "/v1/nothing-here", { token: admin });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});

async function snapshot() {
  const tables = ["orgs", "tokens", "machines", "runs", "idempotency_keys"];
  const out: Record<string, unknown> = {};
  for (const t of tables) out[t] = (await env.DB.prepare(`SELECT * FROM ${t} ORDER BY 1`).all()).results;
  out.run = (await call("GET", `/v1/runs/${runId}`, { token: admin })).body;
  return out;
}
