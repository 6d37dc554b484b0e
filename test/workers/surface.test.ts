// One consistent surface (docs/protocol.md): a malformed cli_version is a bad call, not an old
// runner; an unsupported method on a known path is 405 with Allow; every list pages the same way;
// every Idempotency-Key follows one rule; a resource's POST and GET answers have one shape.

import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { createProject, createRequest, dispatchBuild, grantCredit, readyToBuild, savePlan } from "./builds-helpers";
import { finishRun } from "./events-helpers";
import { call, CLI_VERSION, createOrg, dispatch, registerRunner } from "./helpers";

type Json = Record<string, any>;

describe("a malformed cli_version", () => {
  it("is 400 invalid_request naming cli_version on register, heartbeat and claim, never 426", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const reg = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } })).body.token;
    for (const bad of ["banana", "1.2", "1.2.3.4", "latest"]) {
      const answers = [
        await call("POST", "/v1/runners/register", { token: reg, body: { name: "x", protocols: ["process"], cli_version: bad } }),
        await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: bad, protocols: ["process"] } }),
        await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: bad, protocols: ["process"], wait_ms: 0 } }),
      ];
      for (const res of answers) {
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: "invalid_request", field: "cli_version" });
      }
    }
    // Nothing was registered and the heartbeat recorded nothing.
    const runners = (await call("GET", "/v1/runners", { token: admin })).body.runners;
    expect(runners.map((r: { cli_version: string }) => r.cli_version)).toEqual([CLI_VERSION]);
  });

  it("a well-formed but old version is still 426", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const res = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: "0.0.1", protocols: ["process"] } });
    expect(res.status).toBe(426);
  });
});

describe("an unsupported method on a known path", () => {
  const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
  /** Every registered route path with the methods the app registered for it. */
  function registered(): Map<string, Set<string>> {
    const byPath = new Map<string, Set<string>>();
    for (const r of app.routes) {
      // The dashboard's pages send a browser without a session to sign in, whatever the method (dashboard.test.ts).
      if (r.method === "ALL" || r.path.startsWith("/dash")) continue;
      byPath.set(r.path, (byPath.get(r.path) ?? new Set()).add(r.method));
    }
    return byPath;
  }
  /** A concrete path for a pattern: each :param gets a value of its own shape, so it matches only itself. */
  const concrete = (path: string) => path.replace(/:(\w+)/g, (_m, name) => `sample-${name}`);

  it("answers 405 method_not_allowed with Allow listing what the path supports, on every route", async () => {
    const routes = registered();
    expect(routes.size).toBeGreaterThan(20);
    for (const [path, methods] of routes) {
      const url = concrete(path);
      // Other patterns may match the same concrete path (/v1/runners/claim fits /v1/runners/:id too):
      // a method any of them answers is routed; Allow names the path's own route's methods when it
      // has one of its own, else the union of the patterns'.
      const matching = [...routes].filter(([other]) => new RegExp(`^${other.replace(/:\w+/g, "[^/]+")}$`).test(url));
      const literal = matching.filter(([other]) => !other.includes(":"));
      const routed = new Set(matching.flatMap(([, m]) => [...m]));
      const allow = new Set((literal.length > 0 ? literal : matching).flatMap(([, m]) => [...m]));
      for (const method of METHODS.filter((m) => !routed.has(m))) {
        const res = await call(method, url);
        expect(res.status, `${method} ${url}`).toBe(405);
        expect(res.body.error.code).toBe("method_not_allowed");
        expect(res.headers.get("Allow"), `${method} ${url}`).toBe([...allow].sort().join(", "));
        expect(res.body.error.allow).toEqual([...allow].sort());
      }
      expect(methods.size).toBeGreaterThan(0);
    }
  });

  it("GET /v1/runners/claim is 405 with Allow: POST, its own method, not the DELETE of /v1/runners/:id", async () => {
    const res = await call("GET", "/v1/runners/claim");
    expect(res.status).toBe(405);
    expect(res.headers.get("Allow")).toBe("POST");
  });

  it("DELETE /v1/runs is 405 with Allow: GET, POST; an unknown path is still 404", async () => {
    const res = await call("DELETE", "/v1/runs");
    expect(res.status).toBe(405);
    expect(res.headers.get("Allow")).toBe("GET, POST");
    const unknown = await call("GET", "/v1/nothing-here");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("not_found");
    expect(unknown.headers.get("Allow")).toBeNull();
    expect((await call("DELETE", "/v1/runs/run_0/extra/deep")).status).toBe(404);
  });
});

/** Every page of a list with `limit`, by next_cursor alone, as a client written from the docs would. */
async function pageThrough(token: string, path: string, items: string, limit: number): Promise<Json[]> {
  const all: Json[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const sep = path.includes("?") ? "&" : "?";
    const res = await call("GET", `${path}${sep}limit=${limit}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`, { token });
    expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
    expect(Object.keys(res.body)).not.toContain("next_after");
    expect(Object.keys(res.body)).not.toContain("next_before");
    expect(res.body).toHaveProperty("next_cursor");
    expect(res.body[items].length).toBeLessThanOrEqual(limit);
    all.push(...res.body[items]);
    if (res.body.next_cursor === null) return all;
    expect(typeof res.body.next_cursor).toBe("string");
    cursor = res.body.next_cursor;
  }
  throw new Error(`${path}: no last page`);
}

describe("every list pages with limit, cursor and next_cursor", () => {
  it("runs, tokens, runners, projects, build requests, build jobs and credit entries: all items once, newest first, null on the last page", async () => {
    const { admin, requestIds, projectId } = await readyToBuild({ creditCents: 100_000, requests: 3, name: "lists" });
    for (const id of requestIds) expect((await dispatchBuild(admin, id)).status).toBe(201);
    await grantCredit(admin, 500);
    for (let i = 0; i < 2; i++) await registerRunner(admin, { name: `extra-${i}` });
    for (let i = 0; i < 2; i++) await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } });
    for (let i = 0; i < 2; i++) await createProject(admin);
    await createRequest(admin, projectId, "one more");
    for (let i = 0; i < 2; i++) await dispatch(admin);

    const lists: { path: string; items: string; key: string }[] = [
      { path: "/v1/runs", items: "runs", key: "id" },
      { path: "/v1/tokens", items: "tokens", key: "id" },
      { path: "/v1/runners", items: "runners", key: "id" },
      { path: "/v1/projects", items: "projects", key: "id" },
      { path: "/v1/build-requests", items: "requests", key: "id" },
      { path: "/v1/build-jobs", items: "jobs", key: "id" },
      { path: "/v1/credits", items: "entries", key: "seq" },
    ];
    for (const list of lists) {
      const whole = await call("GET", `${list.path}?limit=200`, { token: admin });
      expect(whole.body.next_cursor, list.path).toBeNull();
      const expected = whole.body[list.items].map((x: Json) => x[list.key]);
      expect(expected.length, list.path).toBeGreaterThanOrEqual(3);
      for (const limit of [1, 2]) {
        const paged = await pageThrough(admin, list.path, list.items, limit);
        expect(paged.map((x) => x[list.key]), `${list.path} limit=${limit}`).toEqual(expected);
      }
    }
  });

  it("a run's events: the cursor is a sequence number; next_cursor stays a resume point while the run runs and is null after its last event", async () => {
    const { admin } = await createOrg();
    const ended = await dispatch(admin);
    await finishRun(admin, ended);
    const running = await dispatch(admin);
    const open = await call("GET", `/v1/runs/${running}/events?limit=1000`, { token: admin });
    expect(open.body.terminal).toBe(false);
    const lastSeq = open.body.events[open.body.events.length - 1].seq;
    expect(open.body.next_cursor).toBe(String(lastSeq));
    const empty = await call("GET", `/v1/runs/${running}/events?cursor=${lastSeq}`, { token: admin });
    expect(empty.body).toMatchObject({ events: [], next_cursor: String(lastSeq), terminal: false });

    const all = await call("GET", `/v1/runs/${ended}/events?limit=1000`, { token: admin });
    expect(all.body.terminal).toBe(true);
    expect(all.body.next_cursor).toBeNull();
    const seqs = all.body.events.map((e: Json) => e.seq);
    expect(seqs.length).toBeGreaterThan(2);
    const paged = await pageThrough(admin, `/v1/runs/${ended}/events`, "events", 1);
    expect(paged.map((e) => e.seq)).toEqual(seqs);
  });

  it("the old names are refused: after= on an events page, before= on credit entries", async () => {
    const { admin } = await createOrg();
    const run = await dispatch(admin);
    const after = await call("GET", `/v1/runs/${run}/events?after=0`, { token: admin });
    expect(after.status).toBe(400);
    const before = await call("GET", "/v1/credits?before=5", { token: admin });
    expect(before.status).toBe(400);
    const bad = await call("GET", "/v1/runners?cursor=nonsense", { token: admin });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_request", field: "cursor" });
  });
});

describe("one Idempotency-Key rule on every endpoint that takes it", () => {
  /** Each endpoint: a first payload, another payload, and how to send one under a key. */
  type Endpoint = {
    name: string;
    setup: () => Promise<{ token: string; send: (payload: "first" | "other", key: string) => ReturnType<typeof call> }>;
  };
  const endpoints: Endpoint[] = [
    {
      name: "POST /v1/runs",
      setup: async () => {
        const { admin } = await createOrg();
        return {
          token: admin,
          send: (payload, key) => call("POST", "/v1/runs", { token: admin, body: { brief: payload, launch: { command: ["node", "agent.mjs"] } }, headers: { "Idempotency-Key": key } }),
        };
      },
    },
    {
      name: "POST /v1/credits/grants",
      setup: async () => {
        const { admin } = await createOrg();
        return {
          token: admin,
          send: (payload, key) => call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: payload === "first" ? 100 : 200 }, headers: { "Idempotency-Key": key } }),
        };
      },
    },
    {
      name: "POST /v1/build-requests/:id/dispatch",
      setup: async () => {
        const { admin, requestIds } = await readyToBuild({ creditCents: 100_000, requests: 2, name: "idem" });
        // The other payload is the same key on another request, whose plan differs.
        await savePlan(admin, requestIds[1], { chain_target: "base-mainnet" });
        return {
          token: admin,
          send: (payload, key) => call("POST", `/v1/build-requests/${requestIds[payload === "first" ? 0 : 1]}/dispatch`, { token: admin, body: {}, headers: { "Idempotency-Key": key } }),
        };
      },
    },
  ];

  for (const endpoint of endpoints) {
    it(`${endpoint.name}: new is 201, a replay is 200 with the same body, another payload is 409, a malformed key is 400`, async () => {
      const { send } = await endpoint.setup();
      const first = await send("first", "key-1");
      expect(first.status, JSON.stringify(first.body)).toBe(201);
      const replay = await send("first", "key-1");
      expect(replay.status).toBe(200);
      expect(replay.body).toEqual(first.body);
      const other = await send("other", "key-1");
      expect(other.status).toBe(409);
      expect(other.body.error.code).toBe("idempotency_conflict");
      for (const bad of ["", "has space", "x".repeat(201)]) {
        const res = await send("other", bad);
        expect(res.status, `key ${JSON.stringify(bad)}`).toBe(400);
        expect(res.body.error).toMatchObject({ code: "invalid_request", field: "Idempotency-Key" });
        expect(res.body.error.message).toContain("Idempotency-Key");
      }
    });
  }
});
