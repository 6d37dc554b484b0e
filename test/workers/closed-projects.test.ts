// A claim's work is bounded whatever the number of autopilot projects: the scheduler keeps each
// project's verdict (durable-objects/scheduler/closed-projects.ts) and computes it again only after its
// gates or slots change or its dispatch window's next edge passes, and one head read leaves out at
// most AUTOPILOT_SCHEDULER_CLOSED_PROJECTS_MAX closed projects in D1 (docs/protocol.md,
// "Autopilot scheduler"). Each test has its own organization, so its own SchedulerObject.

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { nextWindowEdgeMs, type DispatchWindow } from "../../src/autopilot/scheduler-gates";
import { dispatchRun } from "../../src/run/dispatch";
import { ClosedProjects } from "../../durable-objects/scheduler/closed-projects";
import { attemptCall, call, claim, createOrg, dispatch, parseCost, registerRunner, schedulerOf, setSchedulerConfig } from "./helpers";

let nextOrg = 0;

async function setup() {
  const org = await createOrg(`closed-${++nextOrg}`);
  const runner = await registerRunner(org.admin);
  return { ...org, runner, scheduler: schedulerOf(org.orgId) };
}

/** A queued run of the project, as autopilot admission creates it. */
async function queueRun(orgId: string, projectId: string, priority = 100): Promise<string> {
  const body = { brief: "fix the bug", launch: { command: ["node", "agent.mjs"] }, priority };
  return (await dispatchRun(env, orgId, body, null, { projectId })).run.id;
}

/** The run a claim answered at once is handed, or null (204). */
async function claimed(token: string): Promise<string | null> {
  const res = await claim(token, 0);
  expect([200, 204]).toContain(res.status);
  return res.status === 200 ? res.body.run_id : null;
}

async function verdictsComputed(orgId: string): Promise<number> {
  return (await schedulerOf(orgId).readStats()).closedVerdicts;
}

describe("closed projects' verdicts are kept between claims", () => {
  it("a claim with unchanged gates computes no project's verdict, however many projects; a gate change is honoured by the next claim", async () => {
    const s = await setup();
    const projects = Array.from({ length: 30 }, (_, i) => `prj_closed_${nextOrg}_${i}`);
    for (const p of projects) await s.scheduler.changeGates(p, { enabled: false });
    const held = new Map<string, string>();
    for (const p of projects) held.set(p, await queueRun(s.orgId, p));
    await dispatch(s.admin);
    expect(held.values()).not.toContain(await claimed(s.runner.token));
    const warm = await verdictsComputed(s.orgId);

    // New work drops the heads read ahead: each claim below reads the heads again.
    for (let i = 0; i < 3; i++) {
      const plain = await dispatch(s.admin);
      expect(await claimed(s.runner.token)).toBe(plain);
    }
    expect(await verdictsComputed(s.orgId)).toBe(warm);

    // Enabled again: the next claim hands its run out, and only its verdict was computed again.
    const [opened] = projects;
    await s.scheduler.changeGates(opened, { enabled: true });
    await dispatch(s.admin, { priority: 0 });
    expect(await claimed(s.runner.token)).toBe(held.get(opened));
    expect(await verdictsComputed(s.orgId)).toBe(warm + 1);

    // Drained, its next run is not handed out; enabled again, it is.
    const next = await queueRun(s.orgId, opened);
    await s.scheduler.changeGates(opened, { draining: true });
    expect(await claimed(s.runner.token)).not.toBe(next);
    await s.scheduler.changeGates(opened, { draining: false });
    expect(await claimed(s.runner.token)).toBe(next);
  });

  it("a slot given back opens its project's runs to the next claim", async () => {
    const s = await setup();
    const project = `prj_slot_${nextOrg}`;
    await s.scheduler.changeGates(project, { concurrency: 1 });
    const first = await queueRun(s.orgId, project);
    const second = await queueRun(s.orgId, project);
    expect(await claimed(s.runner.token)).toBe(first);
    // Its one slot is taken: the project is closed and its second run stays queued.
    expect(await claimed(s.runner.token)).toBeNull();
    // Its launch failed: it is queued again (after a backoff) and its slot goes back.
    expect((await attemptCall(s.runner.token, first, 1, "launch-failed", { error: "image pull failed" })).status).toBe(200);
    expect(await claimed(s.runner.token)).toBe(second);
  });
});

describe("AUTOPILOT_SCHEDULER_CLOSED_PROJECTS_MAX", () => {
  /** An organization whose scheduler sends at most `max` closed projects with a head read. */
  async function bounded(max: number) {
    const s = await setup();
    await setSchedulerConfig(s.orgId, { autopilotSchedulerClosedProjectsMax: max });
    return s;
  }

  /** The D1 rows of a claim that reads the queue heads (new work dropped those read ahead), handed a plain run. */
  async function claimRows(s: Awaited<ReturnType<typeof setup>>): Promise<number> {
    const plain = await dispatch(s.admin);
    const res = await claim(s.runner.token, 0);
    expect(res.body.run_id).toBe(plain);
    return parseCost(res.headers.get("Docket-Cost")).d1_rows_read;
  }

  it("a claim reads no more D1 rows with 40 closed projects than with 2: one head read sends at most that many", async () => {
    const rowsWithClosed = async (count: number) => {
      const s = await bounded(2);
      for (let i = 0; i < count; i++) await s.scheduler.changeGates(`prj_idle_${nextOrg}_${i}`, { enabled: false });
      // One closed project has a run ahead of the plain work, so the head read compares with the list.
      const crowding = `prj_crowding_${nextOrg}`;
      await s.scheduler.changeGates(crowding, { enabled: false });
      await queueRun(s.orgId, crowding);
      await claimRows(s); // reads the label sets and the machine's token
      return claimRows(s);
    };
    // Within 2 rows: the sweep row (once a second) and the label set (every 5 s) may be read again on a slow machine.
    const few = await rowsWithClosed(2);
    const many = await rowsWithClosed(40);
    expect(Math.abs(many - few)).toBeLessThanOrEqual(2);
  });

  it("runs of closed projects beyond it are left out in the scheduler: never handed out, and other work is", async () => {
    const s = await bounded(2);
    // Six disabled projects, three queued runs each, all ahead of the plain work in queue order.
    const projects = Array.from({ length: 6 }, (_, i) => `prj_many_${nextOrg}_${i}`);
    const held = new Set<string>();
    for (const p of projects) await s.scheduler.changeGates(p, { enabled: false });
    for (const p of projects) for (let i = 0; i < 3; i++) held.add(await queueRun(s.orgId, p));
    for (let i = 0; i < 3; i++) await claimRows(s);
    expect(await claimed(s.runner.token)).toBeNull();
    for (const id of held) expect((await call("GET", `/v1/runs/${id}`, { token: s.admin })).body.state).toBe("queued");
  });

  it("a list past the bound sends the projects whose runs a head read listed last", () => {
    const closed = new Set(["a", "b", "c", "d"]);
    const cache = new ClosedProjects(
      () => ["a", "b", "c", "d", "e"],
      (id) => ({ closed: closed.has(id), untilMs: Infinity }),
    );
    expect(cache.list(0, 2)).toEqual(["c", "d"]);
    expect(cache.isClosed("a")).toBe(true);
    expect(cache.isClosed("e")).toBe(false);
    cache.crowding("a");
    expect(cache.list(0, 2)).toEqual(["d", "a"]);
    expect(cache.computed).toBe(5);
  });
});

describe("a dispatch window's verdict", () => {
  const at = (iso: string) => Date.parse(iso);
  const window = (w: Partial<DispatchWindow>): DispatchWindow => ({ days: ["wed"], start: "09:00", end: "17:00", timeZone: "UTC", ...w });

  it("is kept until the window's next edge, and computed again once it passed", () => {
    let open = false;
    const cache = new ClosedProjects(
      () => ["p"],
      (_id, nowMs) => ({ closed: !open, untilMs: nextWindowEdgeMs(window({}), nowMs) }),
    );
    // 2026-03-04 is a Wednesday.
    expect(cache.list(at("2026-03-04T08:00:00Z"), 10)).toEqual(["p"]);
    open = true;
    expect(cache.list(at("2026-03-04T08:59:59Z"), 10)).toEqual(["p"]);
    expect(cache.computed).toBe(1);
    expect(cache.list(at("2026-03-04T09:00:00Z"), 10)).toEqual([]);
    expect(cache.computed).toBe(2);
  });

  it("ends at the next local start or end, in the window's own time zone", () => {
    expect(nextWindowEdgeMs(window({}), at("2026-03-04T08:00:30Z"))).toBe(at("2026-03-04T09:00:00Z"));
    expect(nextWindowEdgeMs(window({}), at("2026-03-04T09:00:00Z"))).toBe(at("2026-03-04T17:00:00Z"));
    expect(nextWindowEdgeMs(window({}), at("2026-03-04T18:00:00Z"))).toBe(at("2026-03-05T09:00:00Z"));
    // Tokyo is UTC+9: 09:00 there is 00:00 UTC.
    expect(nextWindowEdgeMs(window({ timeZone: "Asia/Tokyo" }), at("2026-03-03T20:00:00Z"))).toBe(at("2026-03-04T00:00:00Z"));
  });

  it("never outlives an edge across a daylight saving change", () => {
    // New York springs forward on 2026-03-08 at 02:00 EST (07:00 UTC) to 03:00 EDT.
    const ny = window({ days: ["sun"], start: "09:00", end: "10:00", timeZone: "America/New_York" });
    // From 01:00 EST, 09:00 EDT is 13:00 UTC: the first look ends at the change, the second at the edge.
    const change = nextWindowEdgeMs(ny, at("2026-03-08T06:00:00Z"));
    expect(change).toBe(at("2026-03-08T07:00:00Z"));
    expect(nextWindowEdgeMs(ny, change)).toBe(at("2026-03-08T13:00:00Z"));
    // A start inside the skipped hour opens the window at the change itself.
    const skipped = window({ days: ["sun"], start: "02:30", end: "04:00", timeZone: "America/New_York" });
    expect(nextWindowEdgeMs(skipped, at("2026-03-08T06:00:00Z"))).toBe(at("2026-03-08T07:00:00Z"));
    // Falling back on 2026-11-01 at 02:00 EDT (06:00 UTC) to 01:00 EST: 09:00 EST is 14:00 UTC.
    const fall = nextWindowEdgeMs(ny, at("2026-11-01T05:00:00Z"));
    expect(fall).toBeLessThanOrEqual(at("2026-11-01T14:00:00Z"));
    expect(nextWindowEdgeMs(ny, fall)).toBe(at("2026-11-01T14:00:00Z"));
  });
});
