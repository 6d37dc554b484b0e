import { describe, expect, it } from "vitest";
import { call, createOrg, runBody } from "./helpers";

describe("dispatch and the runs API", () => {
  it("the same Idempotency-Key and payload replays the first answer (200); another payload is 409 idempotency_conflict", async () => {
    const { admin } = await createOrg();
    const headers = { "Idempotency-Key": "job-42" };
    const first = await call("POST", "/v1/runs", { token: admin, body: runBody({ priority: 3 }), headers });
    expect(first.status).toBe(201);
    // Same payload, keys in another order.
    const again = await call("POST", "/v1/runs", {
      token: admin,
      body: { launch: { command: ["node", "agent.mjs"] }, priority: 3, brief: "fix the bug" },
      headers,
    });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    // Same run, its defaults spelled out: the same payload.
    const spelled = await call("POST", "/v1/runs", {
      token: admin,
      body: { brief: "fix the bug", priority: 3, labels: [], metadata: {}, callback_url: null, launch: { protocol: "process", command: ["node", "agent.mjs"], image: null, env: {} } },
      headers,
    });
    expect(spelled.status).toBe(200);
    expect(spelled.body.id).toBe(first.body.id);
    const other = await call("POST", "/v1/runs", { token: admin, body: runBody({ priority: 4 }), headers });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe("idempotency_conflict");
    const list = await call("GET", "/v1/runs", { token: admin });
    expect(list.body.runs).toHaveLength(1);
  });

  it("concurrent dispatches with one key create one run", async () => {
    const { admin } = await createOrg();
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => call("POST", "/v1/runs", { token: admin, body: runBody(), headers: { "Idempotency-Key": "same" } })),
    );
    const ids = new Set(answers.map((a) => a.body.id));
    expect(ids.size).toBe(1);
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect((await call("GET", "/v1/runs", { token: admin })).body.runs).toHaveLength(1);
  });

  it("a run carries its brief, repository, labels, priority and launch spec, and shows state, attempt, steps, stop request, last error and timestamps", async () => {
    const { admin } = await createOrg();
    const created = await call("POST", "/v1/runs", {
      token: admin,
      body: runBody({
        repository: { url: "https://example.com/acme/app.git", commit: "4f1c2d3" },
        labels: ["linux", "gpu", "linux"],
        priority: 7,
        launch: { protocol: "docker", command: ["agent"], image: "node:20", env: { MODE: "fast" } },
      }),
    });
    expect(created.status).toBe(201);
    const run = (await call("GET", `/v1/runs/${created.body.id}`, { token: admin })).body;
    expect(run).toMatchObject({
      state: "queued",
      attempt: 0,
      brief: "fix the bug",
      repository: { url: "https://example.com/acme/app.git", commit: "4f1c2d3" },
      labels: ["gpu", "linux"],
      priority: 7,
      launch: { protocol: "docker", command: ["agent"], image: "node:20", env: { MODE: "fast" } },
      steps: [],
      stop_request: null,
      last_error: null,
      ended_at_ms: null,
    });
    expect(run.created_at_ms).toBeGreaterThan(0);
    expect(run.updated_at_ms).toBeGreaterThanOrEqual(run.created_at_ms);
  });

  it("lists runs newest first, filtered by state, in pages", async () => {
    const { admin } = await createOrg();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await call("POST", "/v1/runs", { token: admin, body: runBody() })).body.id);
    await call("POST", `/v1/runs/${ids[1]}/cancel`, { token: admin, body: {} });
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const res = await call(
        "GET",
        `/v1/runs?limit=2${cursor ? `&cursor=${cursor}` : ""}`,
        { token: admin },
      );
      seen.push(...res.body.runs.map((r: { id: string }) => r.id));
      cursor = res.body.next_cursor;
      if (!cursor) break;
    }
    expect(new Set(seen)).toEqual(new Set(ids));
    expect(seen).toHaveLength(5);
    const cancelled = await call("GET", "/v1/runs?state=cancelled", { token: admin });
    expect(cancelled.body.runs.map((r: { id: string }) => r.id)).toEqual([ids[1]]);
  });

  it("an unknown run is 404 not_found", async () => {
    const { admin } = await createOrg();
    const res = await call("GET", "/v1/runs/run_000000000000000000000000", { token: admin });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});
