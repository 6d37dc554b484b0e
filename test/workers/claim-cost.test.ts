// A claim's cost must not grow with work the runner cannot serve (../shared/DESIGN.md, "Claims are
// serialized per organization"); claims and heartbeats say what they cost in Docket-Cost.

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import { call, claim, CLI_VERSION, createOrg, dispatch, parseCost, registerRunner, sleep } from "./helpers";

describe("Docket-Cost", () => {
  it("claims (200 and 204) and heartbeats carry their D1 rows and Durable Object requests", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const empty = await claim(runner.token, 0);
    expect(empty.status).toBe(204);
    expect(parseCost(empty.headers.get("Docket-Cost"))).toMatchObject({ d1_rows_written: 0 });
    await dispatch(admin);
    const granted = await claim(runner.token, 0);
    expect(granted.status).toBe(200);
    const cost = parseCost(granted.headers.get("Docket-Cost"));
    expect(cost.do_requests).toBeGreaterThanOrEqual(2); // the scheduler and the run object
    // The queue row moved to claimed, with the indexes that hold its state, the run's row for its
    // machine (run_machines), and the claim's event with its index (docs/BENCHMARKS.md, "What a claim
    // costs"); the indexes of what never changes after dispatch (its project) are not rewritten.
    expect(cost.d1_rows_written).toBe(7);
    const beat = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: CLI_VERSION, protocols: ["process"] } });
    expect(parseCost(beat.headers.get("Docket-Cost")).d1_rows_written).toBe(1);
  });

  it("a machine's first claim reads its token, machine and the sweep row; later ones none, and the sweep row again after CLAIM_SWEEP_TTL_MS", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { labels: ["linux"] }); // registering sets its last-seen time
    // A deployed plane's cron has ticked: the sweep row exists (src/sweep.ts), and no recovery is under way.
    await env.DB.prepare("INSERT OR REPLACE INTO sweep (id, last_tick_at_ms, recovered_at_ms) VALUES (1, ?, 0)").bind(Date.now()).run();
    const sweepTtlMs = loadConfig(env).claimSweepTtlMs;
    const firstAt = Date.now();
    const first = await claim(runner.token, 0);
    expect(first.status).toBe(204);
    // The token by the API (1 row), then the token, its machine and the sweep row by the scheduler (3); no last-seen write while it is fresh.
    expect(parseCost(first.headers.get("Docket-Cost"))).toMatchObject({ d1_rows_read: 4, d1_rows_written: 0 });
    const idle = await claim(runner.token, 0);
    expect(idle.status).toBe(204);
    // Nothing read, unless a loaded machine took CLAIM_SWEEP_TTL_MS over the two claims: then the sweep row, once.
    const sweepRowAgain = Date.now() - firstAt >= sweepTtlMs ? 1 : 0;
    const idleCost = parseCost(idle.headers.get("Docket-Cost"));
    expect(idleCost).toMatchObject({ d1_rows_written: 0, do_requests: 1 });
    expect(idleCost.d1_rows_read).toBeLessThanOrEqual(sweepRowAgain);
    await sleep(sweepTtlMs);
    const later = await claim(runner.token, 0);
    expect(parseCost(later.headers.get("Docket-Cost"))).toEqual({ d1_rows_read: 1, d1_rows_written: 0, do_requests: 1 });
  });

  it("an empty claim reads the same rows whether 0 or 60 runs it cannot serve are queued", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { labels: ["linux"] });
    await claim(runner.token, 0); // warm the scheduler's label sets
    const before = parseCost((await claim(runner.token, 0)).headers.get("Docket-Cost"));
    for (let i = 0; i < 60; i++) await dispatch(admin, { labels: ["gpu"] });
    await new Promise((r) => setTimeout(r, 5_100)); // past the label-set cache, so the new set is known
    await claim(runner.token, 0);
    const after = parseCost((await claim(runner.token, 0)).headers.get("Docket-Cost"));
    expect(after).toEqual(before);
  });

  it("successful claims read the same rows, at most 10 each after the first, whether 20 or 40 runs they can serve are queued", async () => {
    const rowsAtDepth = async (depth: number) => {
      const { admin } = await createOrg();
      const runner = await registerRunner(admin);
      for (let i = 0; i < depth; i++) await dispatch(admin);
      const rows: number[] = [];
      for (let i = 0; i < 3; i++) {
        const granted = await claim(runner.token, 0);
        expect(granted.status).toBe(200);
        rows.push(parseCost(granted.headers.get("Docket-Cost")).d1_rows_read);
      }
      return rows;
    };
    const shallow = await rowsAtDepth(20);
    const deep = await rowsAtDepth(40);
    // The first claim also reads the label sets and the head with its rows ahead (10 or 11 rows,
    // as D1 counts the index rows it steps over); the claims after it read the same at any depth,
    // give or take the sweep row, which a claim reads again once CLAIM_SWEEP_TTL_MS (1 s) has
    // passed since the last read: on a loaded machine three claims can span it at either depth.
    const sweepRow = 1;
    deep.slice(1).forEach((rows, i) => expect(Math.abs(rows - shallow[i + 1])).toBeLessThanOrEqual(sweepRow));
    expect(Math.max(...deep.slice(1), ...shallow.slice(1))).toBeLessThanOrEqual(10);
    for (const rows of [shallow, deep]) expect(rows.reduce((a, b) => a + b) / rows.length).toBeLessThanOrEqual(10);
  });

  it("queue heads read ahead serve the next claims without a read of their own, and new work is seen at once", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const low = [];
    for (let i = 0; i < 6; i++) low.push(await dispatch(admin, { priority: 1 }));
    const first = await claim(runner.token, 0); // reads the label sets and the head, CLAIM_READ_AHEAD rows more
    expect(first.body.run_id).toBe(low[0]);
    const second = await claim(runner.token, 0);
    expect(second.body.run_id).toBe(low[1]);
    // The token verified at the first claim: only the queue row's write, no head read.
    expect(parseCost(second.headers.get("Docket-Cost")).d1_rows_read).toBeLessThanOrEqual(1);
    // Higher-priority work dispatched now is claimed next, not the rows read before it existed.
    const high = await dispatch(admin, { priority: 9 });
    expect((await claim(runner.token, 0)).body.run_id).toBe(high);
    expect((await claim(runner.token, 0)).body.run_id).toBe(low[2]);
  });
});
