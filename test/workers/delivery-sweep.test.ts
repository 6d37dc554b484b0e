// The cron's delivery sweep (src/tracker/deliver.ts, src/callbacks/schedule.ts): a tracker delivery
// or a completion callback whose queue message was lost stays pending with nothing left to send it;
// the next cron tick sends it again once its next try is overdue by more than DELIVERY_STALE_MS, and
// leaves a recent one, or one whose try is being made, to its own message.

import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { ensurePending, readDelivery } from "../../src/callbacks/deliveries";
import { loadConfig } from "../../src/config";
import worker from "../../src/index";
import { claimTry, readTrackerDelivery, recordRequest } from "../../src/tracker/receipts";
import type { DeliveryRequest } from "../../src/run/ticket-requests";
import { createProject, installRealAutopilotWithTracker } from "./autopilot-fakes";
import { finishRun, stubReceiver, waitFor } from "./events-helpers";
import { createOrg, dispatch } from "./helpers";

const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();
/** Long enough ago for a delivery asked for then to be overdue. */
const LONG_AGO_MS = config.deliveryStaleMs + 60_000;
const RECEIVER = "https://receiver.example/docket-sweep";

async function tick(): Promise<void> {
  await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
}

let nextRun = 1;
/** A run id of its own for each delivery (the sweep reads no run). */
const runId = () => `run_${(nextRun++).toString(16).padStart(24, "0")}`;

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
});

describe("the delivery sweep on the cron tick", () => {
  it("a pending tracker delivery whose queue message was lost is delivered after a cron tick, also after a try that never ended; a recent one, one being tried and one waiting out its backoff are left alone", async () => {
    const org = await createOrg("sweep-tracker");
    const project = await createProject(org.admin);
    const tracker = fake.tracker(project.id);
    const request = (number: number): DeliveryRequest => ({ kind: "pr_comment", ticket_key: `github:${project.repository}#${number}`, project_id: project.id, pr_url: `https://github.com/${project.repository}/pull/${number}` });
    // Each recorded as the run's event handler records it, but with no message sent: lost.
    const lost = { runId: runId(), number: 9_101 };
    const recent = { runId: runId(), number: 9_102 };
    const inFlight = { runId: runId(), number: 9_103 };
    const crashed = { runId: runId(), number: 9_104 };
    const waiting = { runId: runId(), number: 9_105 };
    await recordRequest(env.DB, { runId: lost.runId, orgId: org.orgId, request: request(lost.number), now: Date.now() - LONG_AGO_MS });
    await recordRequest(env.DB, { runId: recent.runId, orgId: org.orgId, request: request(recent.number), now: Date.now() });
    // Asked for long ago, and its first try begun just now by a consumer that is making it.
    await recordRequest(env.DB, { runId: inFlight.runId, orgId: org.orgId, request: request(inFlight.number), now: Date.now() - LONG_AGO_MS });
    expect(await claimTry(env.DB, inFlight.runId, "pr_comment", 0, Date.now())).toBe(1);
    // Its first try begun long ago by a consumer that died in it, and the message gone with it.
    await recordRequest(env.DB, { runId: crashed.runId, orgId: org.orgId, request: request(crashed.number), now: Date.now() - LONG_AGO_MS });
    expect(await claimTry(env.DB, crashed.runId, "pr_comment", 0, Date.now() - LONG_AGO_MS)).toBe(1);
    // Five tries made, the last begun longer ago than DELIVERY_STALE_MS but less than that and its backoff (base × 2^4).
    await recordRequest(env.DB, { runId: waiting.runId, orgId: org.orgId, request: request(waiting.number), now: Date.now() - LONG_AGO_MS });
    const fifthTryAtMs = Date.now() - config.deliveryStaleMs - config.trackerDeliveryBackoffBaseMs * 8;
    for (let tries = 0; tries < 5; tries++) expect(await claimTry(env.DB, waiting.runId, "pr_comment", tries, fifthTryAtMs)).toBe(tries + 1);

    await tick();
    const delivered = await waitFor("the lost delivery to be delivered", async () => {
      const row = await readTrackerDelivery(env.DB, lost.runId, "pr_comment");
      return row?.status === "delivered" ? row : undefined;
    });
    expect(delivered).toMatchObject({ tries: 1, lastError: null });
    expect(tracker.comments.get(lost.number)?.map((c) => c.body)).toEqual([expect.stringContaining(`/pull/${lost.number}`)]);
    // The second try of the one that crashed, counted after its first.
    const second = await waitFor("the crashed delivery to be delivered", async () => {
      const row = await readTrackerDelivery(env.DB, crashed.runId, "pr_comment");
      return row?.status === "delivered" ? row : undefined;
    });
    expect(second.tries).toBe(2);
    expect(tracker.comments.get(crashed.number)).toHaveLength(1);

    await new Promise((r) => setTimeout(r, 1_000));
    expect(await readTrackerDelivery(env.DB, recent.runId, "pr_comment")).toMatchObject({ status: "pending", tries: 0 });
    expect(await readTrackerDelivery(env.DB, inFlight.runId, "pr_comment")).toMatchObject({ status: "pending", tries: 1 });
    expect(tracker.comments.get(recent.number) ?? []).toEqual([]);
    expect(tracker.comments.get(inFlight.number) ?? []).toEqual([]);
    expect(await readTrackerDelivery(env.DB, waiting.runId, "pr_comment")).toMatchObject({ status: "pending", tries: 5 });
    expect(tracker.comments.get(waiting.number) ?? []).toEqual([]);
  });

  it("a pending completion callback whose queue message was lost is attempted after a cron tick; a recent one is left alone", async () => {
    const { admin, orgId } = await createOrg("sweep-callback");
    const receiver = stubReceiver(RECEIVER, () => new Response("ok", { status: 200 }));
    restore = receiver.restore;
    // Two runs that ended; each callback round was started, and its message lost.
    const lost = await dispatch(admin);
    await finishRun(admin, lost);
    const recent = await dispatch(admin);
    await finishRun(admin, recent);
    await ensurePending(env.DB, { runId: lost, orgId, url: RECEIVER, now: Date.now() - LONG_AGO_MS });
    await ensurePending(env.DB, { runId: recent, orgId, url: RECEIVER, now: Date.now() });

    await tick();
    const delivered = await waitFor("the lost callback to be delivered", async () => {
      const row = await readDelivery(env.DB, lost);
      return row?.status === "delivered" ? row : undefined;
    });
    expect(delivered).toMatchObject({ attempts: 1, lastStatusCode: 200 });
    expect(receiver.received.map((r) => r.headers["docket-run"])).toEqual([lost]);

    await new Promise((r) => setTimeout(r, 1_000));
    expect(await readDelivery(env.DB, recent)).toMatchObject({ status: "pending", attempts: 0 });
    expect(receiver.received).toHaveLength(1);
  });
});
