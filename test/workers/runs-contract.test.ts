// The runs, events and credits routes against the contract (src/protocol/runs.ts, credits.ts): the
// OpenAPI document describes each of them, and what they answer parses with the contract's schemas,
// so a client written from the document reads every field the Worker sends.

import { describe, expect, it } from "vitest";
import { CreditAudit, CreditGrant, Credits } from "../../src/protocol/credits";
import { RedeliveredEvents, Run, RunEventPage, RunPage } from "../../src/protocol/runs";
import { createOrgWithSecret, finishRun } from "./events-helpers";
import { call, runBody } from "./helpers";

type Json = Record<string, any>;

const OPERATIONS: [string, string, string, string][] = [
  ["post", "/v1/runs", "createRun", "Runs"],
  ["get", "/v1/runs", "listRuns", "Runs"],
  ["get", "/v1/runs/{id}", "getRun", "Runs"],
  ["post", "/v1/runs/{id}/cancel", "cancelRun", "Runs"],
  ["get", "/v1/runs/{id}/events", "listRunEvents", "Events"],
  ["get", "/v1/runs/{id}/events/stream", "streamRunEvents", "Events"],
  ["post", "/v1/runs/{id}/events/redeliver", "redeliverRunEvents", "Events"],
  ["post", "/v1/runs/{id}/callback/redeliver", "redeliverRunCallback", "Events"],
  ["get", "/v1/credits", "getCredits", "Credits"],
  ["post", "/v1/credits/grants", "grantCredits", "Credits"],
  ["get", "/v1/credits/audit", "getCreditAudit", "Credits"],
];

async function openapi(): Promise<Json> {
  const res = await call("GET", "/v1/openapi.json");
  expect(res.status).toBe(200);
  return res.body;
}

/** The error codes an operation's document lists for one status. */
function codesAt(op: Json, status: number): string[] {
  return op.responses[String(status)]?.content["application/json"].schema.properties.error.properties.code.enum ?? [];
}

describe("the document describes the runs, events and credits routes", () => {
  it("has each operation with its id, tag, and the refusals its handler can give", async () => {
    const doc = await openapi();
    for (const [method, path, id, tag] of OPERATIONS) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method.toUpperCase()} ${path}`).toBeTruthy();
      expect(op.operationId).toBe(id);
      expect(op.tags).toEqual([tag]);
    }
    const op = (method: string, path: string) => doc.paths[path][method];
    expect(codesAt(op("post", "/v1/runs"), 409)).toEqual(["idempotency_conflict"]);
    expect(codesAt(op("get", "/v1/runs/{id}"), 404)).toEqual(["not_found"]);
    expect(codesAt(op("post", "/v1/runs/{id}/cancel"), 410)).toEqual(["task_gone"]);
    expect(codesAt(op("post", "/v1/runs/{id}/cancel"), 409)).toEqual(["invalid_transition"]);
    expect(Object.keys(op("post", "/v1/runs/{id}/cancel").responses)).toEqual(expect.arrayContaining(["200", "202"]));
    expect(codesAt(op("get", "/v1/runs/{id}/events"), 410)).toEqual(["events_pruned"]);
    expect(codesAt(op("get", "/v1/runs/{id}/events/stream"), 429).sort()).toEqual(["rate_limited", "too_many_streams"]);
    expect(codesAt(op("post", "/v1/credits/grants"), 403)).toEqual(["forbidden"]);
    expect(codesAt(op("post", "/v1/runs/{id}/callback/redeliver"), 409)).toEqual(["invalid_transition"]);
    expect(codesAt(op("post", "/v1/credits/grants"), 409)).toEqual(["idempotency_conflict"]);
  });

  it("documents the live stream as server-sent events resumable by Last-Event-ID or ?after", async () => {
    const stream = (await openapi()).paths["/v1/runs/{id}/events/stream"].get;
    expect(Object.keys(stream.responses["200"].content)).toEqual(["text/event-stream"]);
    expect(stream.responses["204"]).toBeTruthy();
    const params = stream.parameters.map((p: Json) => `${p.in} ${p.name}`);
    expect(params).toEqual(expect.arrayContaining(["path id", "query after", "header Last-Event-ID"]));
  });

  it("documents one Idempotency-Key rule on both endpoints that take it", async () => {
    const doc = await openapi();
    const header = (op: Json) => op.parameters.find((p: Json) => p.in === "header" && p.name === "Idempotency-Key");
    const run = header(doc.paths["/v1/runs"].post);
    const grant = header(doc.paths["/v1/credits/grants"].post);
    expect(run.required).toBe(false);
    expect(grant.required).toBe(false);
    // The rule is the same text; only how long a key holds differs, by what it names.
    const rule = (d: string) => d.slice(0, d.indexOf("Keys are per organization"));
    expect(rule(run.description)).toBe(rule(grant.description));
    expect(run.description).toContain("IDEMPOTENCY_KEY_TTL_MS");
    expect(grant.description).toContain("forever");
    for (const op of [doc.paths["/v1/runs"].post, doc.paths["/v1/credits/grants"].post]) {
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(["200", "201", "409"]));
    }
  });
});

describe("the answers parse with the contract's schemas", () => {
  it("POST, GET and cancel answer a run in one shape, Run; its list items and events pages are documented", async () => {
    const { admin } = await createOrgWithSecret("contract");
    const created = await call("POST", "/v1/runs", { token: admin, body: runBody({ callback_url: "https://example.com/hook" }), headers: { "Idempotency-Key": "k1" } });
    expect(created.status).toBe(201);
    const read = await call("GET", `/v1/runs/${created.body.id}`, { token: admin });
    expect(Run.parse(read.body)).toEqual(read.body);
    expect(Run.parse(created.body)).toEqual(read.body);
    const replayed = await call("POST", "/v1/runs", { token: admin, body: runBody({ callback_url: "https://example.com/hook" }), headers: { "Idempotency-Key": "k1" } });
    expect(replayed.status).toBe(200);
    expect(Object.keys(Run.parse(replayed.body)).sort()).toEqual(Object.keys(read.body).sort());
    expect(read.body.callback).toMatchObject({ url: "https://example.com/hook", status: "waiting", created_at_ms: null });

    const cancelled = await call("POST", `/v1/runs/${created.body.id}/cancel`, { token: admin, body: { reason: "enough" } });
    expect(cancelled.status).toBe(200);
    expect(Run.parse(cancelled.body)).toEqual(cancelled.body);
    expect(cancelled.body).toMatchObject({ state: "cancelled", stop_request: { reason: "enough" } });
    expect(Object.keys(cancelled.body).sort()).toEqual(Object.keys(read.body).sort());

    const finished = await call("POST", "/v1/runs", { token: admin, body: runBody() });
    await finishRun(admin, finished.body.id);
    const doneBody = (await call("GET", `/v1/runs/${finished.body.id}`, { token: admin })).body;
    const done = Run.parse(doneBody);
    expect(done).toEqual(doneBody);
    expect(done.steps).toHaveLength(1);
    expect(done.artifact).toMatchObject({ empty: false, exit_codes: { agent: 0 } });
    expect(done.callback).toBeNull();

    // parse() drops fields its schema lacks, so equal means the schema has every field, no more.
    const page = (await call("GET", "/v1/runs?limit=1", { token: admin })).body;
    const listed = RunPage.parse(page);
    expect(listed).toEqual(page);
    expect(listed.runs).toHaveLength(1);
    expect(listed.next_cursor).not.toBeNull();
    const eventsBody = (await call("GET", `/v1/runs/${finished.body.id}/events?limit=1000`, { token: admin })).body;
    const events = RunEventPage.parse(eventsBody);
    expect(events).toEqual(eventsBody);
    expect(events.terminal).toBe(true);
    expect(events.events[0]).toMatchObject({ seq: 1, type: "run.created" });

    const requeued = await call("POST", `/v1/runs/${finished.body.id}/events/redeliver`, { token: admin, body: { after: 1 } });
    expect(requeued.status).toBe(202);
    expect(RedeliveredEvents.parse(requeued.body)).toEqual(requeued.body);
    expect(requeued.body.requeued).toBe(events.events.length - 1);
    const noCallback = await call("POST", `/v1/runs/${finished.body.id}/callback/redeliver`, { token: admin, body: {} });
    expect(noCallback.status).toBe(409);
    expect(noCallback.body.error.code).toBe("invalid_transition");
  });

  it("the credit balance, a grant and its replay, and the audit", async () => {
    const { admin } = await createOrgWithSecret("contract-credits");
    const first = await call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: 500, note: "start" }, headers: { "Idempotency-Key": "g1" } });
    expect(first.status).toBe(201);
    expect(CreditGrant.parse(first.body)).toMatchObject({ granted_cents: 500, entry: { kind: "grant", amount_cents: 500, job_id: null } });
    const replay = await call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: 500, note: "start" }, headers: { "Idempotency-Key": "g1" } });
    expect(replay.status).toBe(200);
    expect(CreditGrant.parse(replay.body)).toEqual(first.body);
    const creditsBody = (await call("GET", "/v1/credits", { token: admin })).body;
    const credits = Credits.parse(creditsBody);
    expect(credits).toEqual(creditsBody);
    expect(credits.entries).toHaveLength(1);
    const auditBody = (await call("GET", "/v1/credits/audit", { token: admin })).body;
    const audit = CreditAudit.parse(auditBody);
    expect(audit).toEqual(auditBody);
    expect(audit).toMatchObject({ ok: true, identity: true, entries: 1, problems: [] });
  });
});
