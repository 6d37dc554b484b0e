// Completion callbacks: signed, retried with backoff independently of execution, visible on the
// run, redeliverable by an operator, and never able to change the run's outcome
// (../shared/spec/build-lifecycle.md, "Events and completion retry independently"; docs/callbacks.md).
//
// Only the outbound call to the receiver is stubbed (the Worker shares this isolate's fetch); the
// run, the outbox, the Queue and the consumer are the real ones.

import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DEFAULTS } from "../../src/config";
import type { OutboxMessage } from "../../src/env";
import worker from "../../src/index";
import { allEvents, createOrgWithSecret, finishRun, logLines, signaturesOf, signWith, stubReceiver, verifySignature, waitFor } from "./events-helpers";
import { call, dispatch, getRun, runAlarm } from "./helpers";

const RECEIVER = "https://receiver.example/docket-callback";

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
  vi.restoreAllMocks();
});

/**
 * Every outbound request of this isolate answered here, recorded with the run it is about, and never
 * sent: a test of a refused address must not reach it even when the code under test is wrong.
 */
function stubEveryRequest(answer: () => Response) {
  const sent: { url: string; run: string | null }[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    sent.push({ url: request.url, run: request.headers.get("docket-run") });
    return answer();
  });
  /** The URLs requested for `runId`, and any request about no run. */
  return (runId: string) => sent.filter((s) => s.run === runId || s.run === null).map((s) => s.url);
}

/** Makes the next attempt of a run's callback round now, as the Queue's next delivery of its message would. */
async function nextAttempt(runId: string, orgId: string, queueTry: number) {
  const batch = createMessageBatch("docket-events", [
    { id: `cb-${queueTry}`, timestamp: new Date(), attempts: queueTry, body: { kind: "callback", run_id: runId, org_id: orgId, seq: null } },
  ]);
  const ctx = createExecutionContext();
  await worker.queue(batch as unknown as MessageBatch<OutboxMessage>, env);
  await getQueueResult(batch, ctx);
}

/** Polls the run until its callback has the status wanted. */
const callbackReaches = (admin: string, runId: string, status: string, attempts?: number) =>
  waitFor(`the callback to be ${status}`, async () => {
    const run = await getRun(admin, runId);
    return run.callback?.status === status && (attempts === undefined || run.callback.attempts === attempts) ? run : undefined;
  });

describe("completion callbacks", () => {
  it("a receiver that fails twice then succeeds gets the completion once per attempt, signed, and the run's outcome never changes", async () => {
    const log = vi.spyOn(console, "log");
    const receiver = stubReceiver(RECEIVER, (n) =>
      n < 2 ? new Response(n === 0 ? "upstream down" : "try later", { status: n === 0 ? 500 : 503 }) : new Response("ok"),
    );
    restore = receiver.restore;
    const { admin, secret } = await createOrgWithSecret();
    const runId = await dispatch(admin, { callback_url: RECEIVER });
    expect((await getRun(admin, runId)).callback).toMatchObject({ url: RECEIVER, status: "waiting", attempts: 0 });

    await finishRun(admin, runId);
    const before = await getRun(admin, runId);
    const eventsBefore = await allEvents(admin, runId);
    const run = await callbackReaches(admin, runId, "delivered");

    // Three attempts, each made once, each with the same signed body.
    expect(receiver.received).toHaveLength(3);
    expect(receiver.received.map((r) => r.headers["docket-attempt"])).toEqual(["1", "2", "3"]);
    for (const r of receiver.received) {
      expect(r.headers["content-type"]).toBe("application/json");
      expect(r.headers["docket-event"]).toBe("run.ended");
      expect(r.headers["docket-run"]).toBe(runId);
      expect(r.headers["docket-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(await verifySignature(secret, r.headers["docket-signature"], r.body)).toBe(true);
      expect(await verifySignature("another-secret", r.headers["docket-signature"], r.body)).toBe(false);
      expect(await verifySignature(secret, r.headers["docket-signature"], r.body.replace("completed", "failed"))).toBe(false);
    }
    expect(new Set(receiver.received.map((r) => r.body)).size).toBe(1);
    const body = JSON.parse(receiver.received[0].body);
    expect(body).toMatchObject({ type: "run.ended", run_id: runId, state: "completed", ended_at_ms: before.ended_at_ms });
    expect(body.run.artifact.patch).toContain("diff --git");

    // The receipt is on the run; the run itself is exactly as it ended.
    expect(run.callback).toMatchObject({
      url: RECEIVER,
      status: "delivered",
      attempts: 3,
      max_attempts: DEFAULTS.callbackMaxAttempts,
      last_status_code: 200,
      last_error: null,
    });
    expect(run.callback.delivered_at_ms).toBeGreaterThanOrEqual(run.callback.last_attempt_at_ms);
    const { callback: _c, ...runAfter } = run;
    const { callback: _b, ...runBefore } = before;
    expect(runAfter).toEqual(runBefore);
    expect(await allEvents(admin, runId)).toEqual(eventsBefore);

    // One log line per attempt, with the backoff before the next one.
    const attempts = logLines(log.mock.calls, "callback.attempt").filter((l) => l.run === runId);
    expect(attempts.map((l) => [l.try, l.outcome, l.status_code, l.retry_in_s])).toEqual([
      [1, "pending", 500, 1],
      [2, "pending", 503, 2],
      [3, "delivered", 200, null],
    ]);
    expect(attempts[0].reason).toBe("HTTP 500: the receiver failed");
    expect(attempts.every((l) => Number.isInteger(l.seq))).toBe(true);
    // `attempt` is the run's attempt in every line; the callback's own count is `try`.
    expect(attempts.every((l) => l.attempt === run.attempt)).toBe(true);
    await runAlarm(runId);
  });

  it("a receiver that never succeeds: the delivery fails after its attempts, with the last error, and the run keeps its outcome; an operator redelivers it", async () => {
    const log = vi.spyOn(console, "log");
    const receiver = stubReceiver(RECEIVER, () => new Response("gone fishing", { status: 502 }));
    restore = receiver.restore;
    const { admin } = await createOrgWithSecret();
    const runId = await dispatch(admin, { callback_url: RECEIVER });
    await finishRun(admin, runId, "failed");
    const ended = await getRun(admin, runId);
    expect(ended.state).toBe("failed");

    // The real Queue makes the first attempt; the rest are driven here instead of waiting out the
    // backoff, each as the Queue's next delivery of the callback message would be.
    await waitFor("the first attempt", async () => ((await getRun(admin, runId)).callback?.attempts >= 1 ? true : undefined));
    const orgId = ended.org_id;
    for (let i = 0; i < DEFAULTS.callbackMaxAttempts + 2; i++) {
      const batch = createMessageBatch("docket-events", [
        { id: `cb-${i}`, timestamp: new Date(), attempts: 100 + i, body: { kind: "callback", run_id: runId, org_id: orgId, seq: null } },
      ]);
      const ctx = createExecutionContext();
      await worker.queue(batch as unknown as MessageBatch<OutboxMessage>, env);
      const result = await getQueueResult(batch, ctx);
      if ((await getRun(admin, runId)).callback.status !== "pending") {
        expect(result.explicitAcks).toEqual([`cb-${i}`]);
        break;
      }
      expect(result.retryMessages).toEqual([{ msgId: `cb-${i}` }]);
    }

    const run = await getRun(admin, runId);
    expect(run.callback).toMatchObject({
      status: "failed",
      attempts: DEFAULTS.callbackMaxAttempts,
      last_status_code: 502,
      last_error: "HTTP 502: the receiver failed",
      delivered_at_ms: null,
    });
    // Every attempt number was made exactly once, whoever made it.
    expect(receiver.received.map((r) => Number(r.headers["docket-attempt"])).sort((a, b) => a - b)).toEqual(
      Array.from({ length: DEFAULTS.callbackMaxAttempts }, (_, i) => i + 1),
    );
    // The backoff doubles from CALLBACK_BACKOFF_BASE_MS.
    for (const line of logLines(log.mock.calls, "callback.attempt").filter((l) => l.run === runId && l.outcome === "pending")) {
      expect(line.retry_in_s).toBe(Math.min(DEFAULTS.callbackBackoffMaxMs, DEFAULTS.callbackBackoffBaseMs * 2 ** (line.try - 1)) / 1000);
    }
    expect(run.state).toBe("failed");
    expect(run.version).toBe(ended.version);
    expect(run.last_error).toBe(ended.last_error);

    // A stray delivery of the message after the round ended changes nothing.
    const stray = createMessageBatch("docket-events", [
      { id: "stray", timestamp: new Date(), attempts: 500, body: { kind: "callback", run_id: runId, org_id: orgId, seq: null } },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(stray as unknown as MessageBatch<OutboxMessage>, env);
    expect((await getQueueResult(stray, ctx)).explicitAcks).toEqual(["stray"]);
    expect(receiver.received).toHaveLength(DEFAULTS.callbackMaxAttempts);

    // The real Queue's own message, due again after its backoff, is dropped as a duplicate.
    await waitFor("the Queue's second delivery", async () =>
      logLines(log.mock.calls, "callback.skipped").some((l) => l.run === runId && l.queue_try === 2) ? true : undefined,
    );

    // An operator redelivers the failed callback to a receiver that is back: a new round.
    receiver.restore();
    const back = stubReceiver(RECEIVER, () => new Response(null, { status: 204 }));
    restore = back.restore;
    const redelivery = await call("POST", `/v1/runs/${runId}/callback/redeliver`, { token: admin, body: {} });
    expect(redelivery.status).toBe(202);
    expect(redelivery.body.callback).toMatchObject({ status: "pending", attempts: 0 });
    const delivered = await callbackReaches(admin, runId, "delivered", 1);
    expect(delivered.callback.last_status_code).toBe(204);
    expect(back.received).toHaveLength(1);
    expect(JSON.parse(back.received[0].body).state).toBe("failed");
    expect(delivered.state).toBe("failed");
    await runAlarm(runId);
  });

  it("redelivery works after the run is terminal: the receiver gets the same completion again", async () => {
    const receiver = stubReceiver(RECEIVER, () => new Response("ok"));
    restore = receiver.restore;
    const { admin, secret } = await createOrgWithSecret();
    const runId = await dispatch(admin, { callback_url: RECEIVER });
    await finishRun(admin, runId);
    await callbackReaches(admin, runId, "delivered", 1);
    expect(receiver.received).toHaveLength(1);

    const res = await call("POST", `/v1/runs/${runId}/callback/redeliver`, { token: admin });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ run_id: runId, callback: { status: "pending", attempts: 0, url: RECEIVER } });
    const run = await callbackReaches(admin, runId, "delivered", 1);
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[1].body).toBe(receiver.received[0].body);
    expect(receiver.received[1].headers["docket-attempt"]).toBe("1");
    expect(await verifySignature(secret, receiver.received[1].headers["docket-signature"], receiver.received[1].body)).toBe(true);
    expect(run.state).toBe("completed");
    await runAlarm(runId);
  });

  it("redelivery is refused for a run that has not ended or has no callback_url, and is an admin's call", async () => {
    const { admin } = await createOrgWithSecret();
    const other = await createOrgWithSecret("other");
    const live = await dispatch(admin, { callback_url: RECEIVER });
    const notEnded = await call("POST", `/v1/runs/${live}/callback/redeliver`, { token: admin, body: {} });
    expect(notEnded.status).toBe(409);
    expect(notEnded.body.error).toMatchObject({ code: "invalid_transition", state: "queued" });

    const plain = await dispatch(admin);
    expect((await getRun(admin, plain)).callback).toBeNull();
    await call("POST", `/v1/runs/${plain}/cancel`, { token: admin, body: {} });
    const noUrl = await call("POST", `/v1/runs/${plain}/callback/redeliver`, { token: admin, body: {} });
    expect(noUrl.status).toBe(409);
    expect(noUrl.body.error.message).toContain("callback_url");

    const member = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } });
    expect((await call("POST", `/v1/runs/${live}/callback/redeliver`, { token: member.body.token, body: {} })).status).toBe(403);
    expect((await call("POST", `/v1/runs/${live}/callback/redeliver`, { token: other.admin, body: {} })).status).toBe(404);
    await call("POST", `/v1/runs/${live}/cancel`, { token: admin, body: {} });
    await runAlarm(live);
    await runAlarm(plain);
  });

  it("a rotated secret: during the overlap window callbacks carry both signatures (new first), after it only the new one", async () => {
    // A receiver URL of its own: no other test's callback reaches it.
    const url = "https://rotation.example/docket-callback";
    const receiver = stubReceiver(url, () => new Response("ok"));
    restore = receiver.restore;
    const { admin, orgId, secret: oldSecret } = await createOrgWithSecret();
    const member = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } });
    const refused = await call("POST", "/v1/orgs/current/callback-secret/rotate", { token: member.body.token, body: {} });
    expect(refused.status).toBe(403);

    const rotated = await call("POST", "/v1/orgs/current/callback-secret/rotate", { token: admin, body: {} });
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.callback_secret as string;
    expect(newSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(newSecret).not.toBe(oldSecret);
    expect(rotated.body.previous_secret_valid_until_ms).toBe(rotated.body.rotated_at_ms + DEFAULTS.callbackSecretOverlapMs);

    // Inside the window: one header, two signatures, each verifiable with its own secret.
    const runId = await dispatch(admin, { callback_url: url });
    await finishRun(admin, runId);
    await callbackReaches(admin, runId, "delivered", 1);
    const during = receiver.received[0];
    const header = during.headers["docket-signature"];
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    const { t, v1 } = signaturesOf(header);
    expect(v1).toEqual([await signWith(newSecret, t!, during.body), await signWith(oldSecret, t!, during.body)]);
    expect(await verifySignature(newSecret, header, during.body)).toBe(true);
    expect(await verifySignature(oldSecret, header, during.body)).toBe(true);
    expect(await verifySignature("another-secret", header, during.body)).toBe(false);

    // The window has passed: only the new secret signs.
    await env.DB.prepare("UPDATE orgs SET callback_secret_rotated_at_ms = callback_secret_rotated_at_ms - ? WHERE id = ?")
      .bind(DEFAULTS.callbackSecretOverlapMs, orgId)
      .run();
    expect((await call("POST", `/v1/runs/${runId}/callback/redeliver`, { token: admin, body: {} })).status).toBe(202);
    await waitFor("the redelivery", async () => (receiver.received.length === 2 ? true : undefined));
    await callbackReaches(admin, runId, "delivered", 1);
    const after = receiver.received[1];
    expect(after.headers["docket-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(await verifySignature(newSecret, after.headers["docket-signature"], after.body)).toBe(true);
    expect(await verifySignature(oldSecret, after.headers["docket-signature"], after.body)).toBe(false);

    // A second rotation keeps only the secret it replaced in the window, never the one before.
    const again = await call("POST", "/v1/orgs/current/callback-secret/rotate", { token: admin, body: {} });
    const stored = await env.DB.prepare("SELECT callback_secret, previous_callback_secret FROM orgs WHERE id = ?").bind(orgId).first();
    expect(stored).toEqual({ callback_secret: again.body.callback_secret, previous_callback_secret: newSecret });
    await runAlarm(runId);
  });
});

describe("callback addresses", () => {
  const REFUSED = [
    ["http://127.0.0.1:8080/cb", "127.0.0.1 is a loopback address"],
    ["http://localhost/cb", "localhost is a loopback name"],
    ["http://hooks.localhost/cb", "hooks.localhost is a loopback name"],
    ["http://0x7f.1/cb", "127.0.0.1 is a loopback address"],
    ["http://[::1]/cb", "[::1] is a loopback address"],
    ["http://10.1.2.3/cb", "10.1.2.3 is a private address"],
    ["http://172.16.5.4/cb", "172.16.5.4 is a private address"],
    ["http://192.168.0.10/cb", "192.168.0.10 is a private address"],
    ["http://100.64.0.1/cb", "100.64.0.1 is a shared (carrier-grade NAT) address"],
    ["http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"],
    ["http://[fe80::1]/cb", "[fe80::1] is a link-local address"],
    ["http://[fd12:3456::1]/cb", "[fd12:3456::1] is a unique-local address"],
    ["http://[::ffff:10.0.0.1]/cb", "[::ffff:a00:1] is an IPv4-mapped IPv6 address (a private address)"],
    ["https://93.184.215.14/cb", "93.184.215.14 is a bare IP address"],
    ["http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal is an internal name (.internal)"],
    ["http://printer.local/cb", "printer.local is an internal name (.local)"],
    ["http://intranet/cb", "intranet is a name without a domain"],
  ] as const;

  it("a callback_url to a loopback, private, link-local, unique-local, internal or bare-IP host is refused at dispatch, naming the field, and makes no run", async () => {
    const { admin } = await createOrgWithSecret();
    for (const [url, why] of REFUSED) {
      const res = await call("POST", "/v1/runs", { token: admin, body: { brief: "b", launch: { command: ["x"] }, callback_url: url } });
      expect(res.status, url).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field: "callback_url" });
      expect(res.body.error.message, url).toContain(`body callback_url: ${why};`);
    }
    expect((await call("GET", "/v1/runs", { token: admin })).body.runs).toEqual([]);
    // A public name is taken as before.
    expect((await call("POST", "/v1/runs", { token: admin, body: { brief: "b", launch: { command: ["x"] }, callback_url: RECEIVER } })).status).toBe(201);
  });

  /**
   * A run with RECEIVER as its callback, finished, every request answered by `answer`: once its first
   * attempt's outcome is recorded, the run and the URLs requested for it.
   */
  async function firstAttempt(answer: () => Response) {
    const sentFor = stubEveryRequest(answer);
    const { admin, orgId } = await createOrgWithSecret();
    const runId = await dispatch(admin, { callback_url: RECEIVER });
    await finishRun(admin, runId);
    const run = await waitFor("the first attempt's outcome", async () => {
      const r = await getRun(admin, runId);
      return r.callback?.last_error ? r : undefined;
    });
    return { admin, orgId, runId, run, sent: () => sentFor(runId) };
  }

  it("a receiver's answer never reaches last_error: the run's reader sees its status and a fixed description", async () => {
    const { runId, run, sent } = await firstAttempt(() => new Response("root:x:0:0:root:/root:/bin/bash", { status: 500 }));
    expect(run.callback).toMatchObject({ status: "pending", last_status_code: 500, last_error: "HTTP 500: the receiver failed" });
    expect(JSON.stringify(run)).not.toContain("root:x:0:0");
    expect(sent()).toEqual([RECEIVER]);
    await runAlarm(runId);
  });

  it("a redirect is a failed attempt, never followed", async () => {
    const { runId, run, sent } = await firstAttempt(
      () => new Response("moved", { status: 302, headers: { Location: "http://169.254.169.254/latest/meta-data/" } }),
    );
    expect(run.callback).toMatchObject({
      status: "pending",
      last_status_code: 302,
      last_error: "HTTP 302: the receiver answered with a redirect, which Docket does not follow",
    });
    expect(sent()).toEqual([RECEIVER]);
    await runAlarm(runId);
  });

  it("a stored callback_url that is refused today is checked again at delivery: nothing is sent and the delivery fails at once", async () => {
    const { admin, orgId, runId, sent } = await firstAttempt(() => new Response(null, { status: 503 }));
    // A URL stored before the policy refused it (or before an operator took a host off OUTBOUND_ALLOW_HOSTS).
    await env.DB.prepare("UPDATE callback_deliveries SET url = ? WHERE run_id = ?").bind("http://169.254.169.254/latest/meta-data/", runId).run();

    await nextAttempt(runId, orgId, 2);
    const run = await getRun(admin, runId);
    expect(run.callback).toMatchObject({
      status: "failed",
      attempts: 2,
      last_status_code: null,
      last_error: "not sent: 169.254.169.254 is a link-local address (this deployment sends no callbacks there)",
    });
    expect(sent()).toEqual([RECEIVER]);
    await runAlarm(runId);
  });
});
