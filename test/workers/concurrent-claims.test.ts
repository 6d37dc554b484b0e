// Concurrent claims in one organization's scheduler: claims do not wait for each other; the
// scheduler keeps the candidates it is asking, so no run object is asked by two claims at once, and
// a burst of claims shares one read of the queue heads (../shared/DESIGN.md, "Claims are
// serialized per organization": the run object's compare-and-swap hands an attempt to one machine).

import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { claim, createOrg, dispatch, parseCost, registerRunner } from "./helpers";
import { muteTransitionLogs } from "./quiet";

beforeAll(() => muteTransitionLogs());

async function orgWithRuns(runs: number, machines: number) {
  const { admin, orgId } = await createOrg("burst");
  const runners = [];
  for (let i = 0; i < machines; i++) runners.push(await registerRunner(admin, { name: `box-${i}` }));
  const ids: string[] = [];
  for (let i = 0; i < runs; i++) ids.push(await dispatch(admin, { brief: `run ${i}` }));
  return { orgId, runners, ids };
}

function schedulerStats(orgId: string) {
  return env.SCHEDULER.get(env.SCHEDULER.idFromName(orgId)).readStats();
}

describe("concurrent claims", () => {
  it("N claims at once against N runs get N distinct grants, each asking one run object, at most 10 rows read per claim", async () => {
    const N = 8;
    const { orgId, runners, ids } = await orgWithRuns(N, N);
    const answers = await Promise.all(runners.map((r) => claim(r.token, 0)));
    expect(answers.map((a) => a.status)).toEqual(Array(N).fill(200));
    expect(new Set(answers.map((a) => a.body.run_id))).toEqual(new Set(ids));
    const costs = answers.map((a) => parseCost(a.headers.get("Docket-Cost")));
    // The scheduler and exactly one run object each: no claim was sent to a run another claim was asking.
    for (const cost of costs) expect(cost.do_requests).toBe(2);
    // Rows per successful claim (docs/BENCHMARKS.md): a claim that arrives while others ask reads
    // past their rows, so one claim's share depends on timing; the burst's mean does not grow with it.
    expect(costs.reduce((sum, c) => sum + c.d1_rows_read, 0) / N).toBeLessThanOrEqual(10);
    const stats = await schedulerStats(orgId);
    expect(stats).toMatchObject({ claims: N, granted: N });
    expect(stats.cost.doRequests).toBe(N);
  });

  it("more claims than runs: each run is granted once and its run object asked once; the rest answer 204", async () => {
    const { orgId, runners, ids } = await orgWithRuns(4, 12);
    const answers = await Promise.all(runners.map((r) => claim(r.token, 0)));
    const granted = answers.filter((a) => a.status === 200);
    expect(granted).toHaveLength(4);
    expect(answers.filter((a) => a.status === 204)).toHaveLength(8);
    expect(new Set(granted.map((a) => a.body.run_id))).toEqual(new Set(ids));
    // Four run objects asked in all: claims looked past the candidates others were asking.
    expect((await schedulerStats(orgId)).cost.doRequests).toBe(4);
  });
});
