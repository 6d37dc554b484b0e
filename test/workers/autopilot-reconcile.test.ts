// Autopilot reconciliation through the cron tick (../shared/spec/run-lifecycle.md, "Admission"):
// GitHub never retries a lost webhook, so each tick walks the projects' ready issues again, a
// bounded step (AUTOPILOT_RECONCILE_BATCH) per tick from a persisted cursor; the first tick after
// an outage (the sweep watermark, src/sweep.ts) restarts every pass.
//
// What is real: the project, created through POST /v1/autopilot/projects and walked by the D1
// store (src/autopilot/projects.ts listProjects/readProject), the Agent Brief, eligibility and
// human-readiness rules (src/autopilot/{brief,eligibility,readiness}.ts), the cron entry, the
// cursor and the TicketObject. What stands in: GitHub only (not reachable inside the Workers
// pool): an in-memory TrackerProvider whose issues are the real @octokit/webhooks-examples
// issues.labeled payload with a valid Agent Brief (test/workers/autopilot-fakes.ts).

import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import worker from "../../src/index";
import type { Env } from "../../src/env";
import { ticketStub } from "../../src/autopilot/admission";
import { call, createOrg } from "./helpers";
import { briefBody, createProject, example, installRealAutopilotWithTracker, type FakeTracker, type RealProject } from "./autopilot-fakes";

const MIN = 60_000;
const fake = installRealAutopilotWithTracker();
let org: { orgId: string; admin: string };
let project: RealProject;
let tracker: FakeTracker;

/** A cron tick at `atMs`, with at most two tickets examined per tick. */
async function cronTick(atMs: number) {
  const vars = { ...(env as unknown as Env), AUTOPILOT_RECONCILE_BATCH: "2" } as Env;
  await worker.scheduled(createScheduledController({ scheduledTime: atMs, cron: "* * * * *" }), vars);
}

function ready(number: number) {
  const payload = example("issues", "labeled");
  payload.issue.number = number;
  payload.issue.body = briefBody(payload.issue.body);
  return tracker.fromPayload(payload, number);
}

async function admitted(): Promise<Map<number, string>> {
  const res = await call("GET", `/v1/autopilot/projects/${project.id}/tickets?status=admitted`, { token: org.admin });
  return new Map(res.body.tickets.map((t: Record<string, any>) => [t.number, t.run_id]));
}

beforeAll(async () => {
  org = await createOrg("reconcile");
  project = await createProject(org.admin);
  tracker = fake.tracker(project.id);
  for (const n of [1, 2, 3, 4]) ready(n);
});

describe("reconciliation from the cron", () => {
  const t0 = Date.now();

  it("admits ready issues whose webhook never came, two per tick, resuming from the persisted cursor", async () => {
    await cronTick(t0);
    expect([...(await admitted()).keys()].sort()).toEqual([1, 2]);
    await cronTick(t0 + MIN);
    expect([...(await admitted()).keys()].sort()).toEqual([1, 2, 3, 4]);
    // The next ticks walk the tickets holding runs and start the pass again: nothing new is admitted.
    const before = await admitted();
    await cronTick(t0 + 2 * MIN);
    await cronTick(t0 + 3 * MIN);
    expect(await admitted()).toEqual(before);
  });

  it("the first tick after an outage restarts the pass from the first ready issue (startup reconciliation)", async () => {
    // Land the cursor past #1 and #2: a tick examines them, the next one would go on with #3 and #4.
    await cronTick(t0 + 4 * MIN);
    await cronTick(t0 + 5 * MIN);
    // #1's run ends and a person labels it ready again while Docket is down: the webhook is lost.
    const first = (await admitted()).get(1)!;
    expect((await call("POST", `/v1/runs/${first}/cancel`, { token: org.admin, body: {} })).status).toBe(200);
    ready(1);
    // Ten minutes without a tick is an outage (SWEEP_OUTAGE_THRESHOLD_MS): the pass starts again at #1.
    await cronTick(t0 + 15 * MIN);
    const after = await admitted();
    expect(after.get(1)).toBeDefined();
    expect(after.get(1)).not.toBe(first);
    const at = { projectId: project.id, ticketKey: `github:${project.repository}#1` };
    const history = await ticketStub(env, at).read(at);
    expect(history?.history[0]).toMatchObject({ kind: "admitted", door: "startup", run_id: after.get(1) });
  });

  it("an operator's reconcile examines each issue once, though a ready issue with a run is in both phases of the pass", async () => {
    // Every ready issue holds a run now: one whole pass in one step (the default batch of 50).
    const res = await call("POST", `/v1/autopilot/projects/${project.id}/reconcile`, { token: org.admin, body: {} });
    expect(res.status).toBe(200);
    const tickets = res.body.results.map((r: Record<string, any>) => r.ticket);
    expect(tickets.length).toBe(new Set(tickets).size);
    expect(res.body.examined).toBe(tickets.length + res.body.failures.length);
    expect(new Set(tickets)).toEqual(new Set([1, 2, 3, 4].map((n) => `github:${project.repository}#${n}`)));
  });
});
