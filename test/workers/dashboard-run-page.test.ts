// A run's page at /dash/runs/:id (README.md, "Dashboard", "Run"): it never misreports a run with
// more events than one page holds, reads its events as text, says why a finished run has no
// artifact, and offers pause, resume, cancel and a callback's retry only where the API takes them.
// Also the API it reads: the run's state history and its events newest first.

import { describe, expect, it, onTestFinished, vi } from "vitest";
import { env } from "cloudflare:workers";
import { decide } from "../../src/run/decide";
import { newQueuedRun } from "../../src/run/new-run";
import { DEFAULTS } from "../../src/settings/settings";
import { page, signIn } from "./dashboard-helpers";
import { stubReceiver } from "./events-helpers";
import { attemptCall, call, claim, createOrg, dispatch, registerRunner, report } from "./helpers";

/** The HTML of the element whose opening tag starts with `open` (`<ol id="states"`), up to its closing tag. */
function section(html: string, open: string): string {
  const start = html.indexOf(open);
  if (start < 0) return "";
  const tag = open.slice(1).split(/[ >]/)[0];
  return html.slice(start, html.indexOf(`</${tag}>`, start));
}

/** The sequence numbers of the events a page lists, in the order it lists them. */
const listedSeqs = (html: string) => [...section(html, '<ol class="events" id="events"').matchAll(/<li data-seq="(\d+)">/g)].map((m) => Number(m[1]));

const REVISION = "4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c";

/**
 * A run that completes after 141 events: created, claimed and implementing (3), a phase report
 * with its output (2), 134 output reports, and the final report's artifact and completion (2).
 */
async function runOf141Events() {
  const { admin } = await createOrg();
  const runner = await registerRunner(admin, { name: "builder-1" });
  const id = await dispatch(admin, { repository: { url: "https://github.com/acme/app.git", commit: REVISION } });
  const grant = await claim(runner.token);
  expect((await attemptCall(runner.token, id, 1, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
  const token = grant.body.attempt_token as string;
  expect((await report(token, id, { seq: 1, phase: "implementing", lines: ["reading the code"] })).status).toBe(200);
  for (let seq = 2; seq <= 135; seq++) expect((await report(token, id, { seq, lines: [`line ${seq}`] })).status).toBe(200);
  const patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new";
  const final = { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch, source_revision: REVISION, model: "claude-sonnet-4", limitations: [] }, cost_cents: 250 };
  expect((await report(token, id, { seq: 136, final })).status).toBe(200);
  return { admin, runner, id };
}

/** One run of 141 events for the tests of this file that read it (storage is shared within a file): making it takes seconds. */
let of141: ReturnType<typeof runOf141Events> | null = null;
const sharedRunOf141Events = () => (of141 ??= runOf141Events());

describe("a run's page", () => {
  it("a completed run of 141 events shows completed, its whole state timeline, events newest first and 'Earlier events' back to #1", { timeout: 60_000 }, async () => {
    const { admin, runner, id } = await sharedRunOf141Events();
    const session = await signIn(admin);
    const first = await page(`/dash/runs/${id}`, { cookie: session });
    expect(first.status).toBe(200);
    expect(first.text).toContain('<span id="run-state" class="state" aria-live="polite">completed</span>');
    // The state timeline is the run's own record, not the 100 events one page holds.
    const states = section(first.text, '<ol id="states"');
    for (const state of ["completed", "implementing", "claimed", "queued"]) expect(states).toContain(`<strong>${state}</strong>`);
    expect(states.indexOf("<strong>implementing</strong>")).toBeLessThan(states.indexOf("<strong>completed</strong>"));
    expect(states).toContain(`claimed by machine ${runner.machineId}`);
    // Newest first: #141 to #42, then a link to the events before #42.
    expect(listedSeqs(first.text)).toEqual(Array.from({ length: 100 }, (_, i) => 141 - i));
    expect(first.text).toContain(`<a id="earlier-events" href="/dash/runs/${id}?before=42#events-heading">Earlier events (before #42)</a>`);
    expect(first.text).toContain('<span class="event-text">state: implementing → completed (the daemon reported a result for review)</span>');
    expect(first.text).toContain('<span class="event-text">output:<br/>line 135</span>');

    const earlier = await page(`/dash/runs/${id}?before=42`, { cookie: session });
    expect(earlier.status).toBe(200);
    expect(listedSeqs(earlier.text)).toEqual(Array.from({ length: 41 }, (_, i) => 41 - i));
    expect(earlier.text).not.toContain('id="earlier-events"');
    expect(earlier.text).toContain(`<a href="/dash/runs/${id}#events-heading">Newest events</a>`);
    // Events read as text; their raw data stays one click away.
    expect(earlier.text).toContain('<span class="event-text">dispatched: queued for a runner</span>');
    expect(earlier.text).toContain(`<span class="event-text">attempt 1 claimed by machine ${runner.machineId}</span>`);
    expect(earlier.text).toContain('<span class="event-text">phase: implementing</span>');
    expect(earlier.text).toContain("<summary>run.phase data</summary>");
    // An earlier page of an ended run does not stream.
    expect(earlier.text).not.toContain("live-events.js");
  });

  it("the header shows repository, revision, model and cost; the attempt timeline comes from the run's record", { timeout: 60_000 }, async () => {
    const { admin, id } = await sharedRunOf141Events();
    const html = (await page(`/dash/runs/${id}`, { cookie: await signIn(admin) })).text;
    const facts = section(html, '<dl id="run-facts"');
    expect(facts).toContain("<dt>Repository</dt><dd>https://github.com/acme/app.git</dd>");
    expect(facts).toContain(`<dt>Revision</dt><dd><code>${REVISION}</code></dd>`);
    expect(facts).toContain("<dt>Model</dt><dd>claude-sonnet-4</dd>");
    expect(facts).toContain('<dt>Cost</dt><dd id="run-cost">$2.50</dd>');
    for (const kind of ["claimed", "launched", "report", "end"]) expect(html).toContain(`data-kind="${kind}"`);
    expect(html).toContain("<title>ended: completed at");
  });

  it("a finished run without an artifact says why: cancelled before a runner took it, failed with its error, or completed with no changes", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const runner = await registerRunner(admin);
    const cancelled = await dispatch(admin);
    await call("POST", `/v1/runs/${cancelled}/cancel`, { token: admin, body: { reason: "wrong repository" } });
    const failed = await dispatch(admin);
    const failedGrant = await claim(runner.token);
    await report(failedGrant.body.attempt_token, failed, { seq: 1, final: { outcome: "failed", error: "the tests did not pass", exit_codes: { agent: 1 }, artifact: null, cost_cents: null } });
    const empty = await dispatch(admin);
    const emptyGrant = await claim(runner.token);
    const nothing = { patch: "", source_revision: null, model: null, limitations: [] };
    await report(emptyGrant.body.attempt_token, empty, { seq: 1, final: { outcome: "completed", exit_codes: { agent: 0 }, artifact: nothing, cost_cents: 5 } });

    const artifactOf = async (id: string) => {
      const html = (await page(`/dash/runs/${id}`, { cookie: session })).text;
      return html.slice(html.indexOf("<h2>Artifact</h2>"), html.indexOf("<h2>Completion callback</h2>"));
    };
    const texts = [await artifactOf(cancelled), await artifactOf(failed), await artifactOf(empty)];
    for (const text of texts) expect(text).not.toContain("No artifact yet");
    expect(texts[0]).toContain("No artifact: the run was cancelled before a runner took it (wrong repository).");
    expect(texts[1]).toContain("No artifact: the run failed before the agent reported a result (the tests did not pass).");
    expect(texts[2]).toContain("The run completed with no changes: its patch is empty.");
  });
});

describe("a run's actions on its page", () => {
  it("pause, resume and cancel are each offered only where the run's state allows it, and act through the API", async () => {
    const { admin } = await createOrg();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const session = await signIn(member);
    const id = await dispatch(admin);
    const queued = (await page(`/dash/runs/${id}`, { cookie: session })).text;
    expect(queued).toContain(`<button type="submit" aria-label="Pause run ${id}">Pause run</button>`);
    expect(queued).toContain(`aria-label="Cancel run ${id}"`);
    expect(queued).not.toContain("Resume run");

    const paused = await page(`/dash/runs/${id}/pause`, { cookie: session, form: { reason: "wait for the release" } });
    expect(paused.status).toBe(303);
    expect(paused.headers.get("Location")).toBe(`/dash/runs/${id}?done=pause+requested`);
    expect((await call("GET", `/v1/runs/${id}`, { token: admin })).body).toMatchObject({ state: "paused", hold: true, pause_reason: "wait for the release" });
    const held = (await page(`/dash/runs/${id}`, { cookie: session })).text;
    expect(held).toContain(`<button type="submit" aria-label="Resume run ${id}">Resume run</button>`);
    expect(held).not.toContain("Pause run");
    expect(held).toContain("Paused: wait for the release");

    expect((await page(`/dash/runs/${id}/resume`, { cookie: session, form: {} })).status).toBe(303);
    expect((await call("GET", `/v1/runs/${id}`, { token: admin })).body).toMatchObject({ state: "queued", hold: false });
    // A state the API refuses is its error page, and changes nothing.
    const again = await page(`/dash/runs/${id}/resume`, { cookie: session, form: {} });
    expect(again.status).toBe(409);
    expect(again.text).toContain("not paused");
  });

  it("cancel needs its confirmation box ticked: unticked it is refused and changes nothing; an ended run offers no action", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const id = await dispatch(admin);
    expect((await page(`/dash/runs/${id}`, { cookie: session })).text).toContain('<input type="checkbox" name="confirm" value="yes" required');
    const unticked = await page(`/dash/runs/${id}/cancel`, { cookie: session, form: { reason: "not needed" } });
    expect(unticked.status).toBe(400);
    expect(unticked.text).toContain("Tick the confirmation box");
    expect((await call("GET", `/v1/runs/${id}`, { token: admin })).body.state).toBe("queued");
    const ticked = await page(`/dash/runs/${id}/cancel`, { cookie: session, form: { reason: "not needed", confirm: "yes" } });
    expect(ticked.status).toBe(303);
    expect((await call("GET", `/v1/runs/${id}`, { token: admin })).body.state).toBe("cancelled");
    const ended = (await page(`/dash/runs/${id}`, { cookie: session })).text;
    for (const action of ["Pause run", "Resume run", "Cancel run"]) expect(ended).not.toContain(action);
  });

  it("a failed completion callback is offered to an admin as 'Retry the failed callback', which starts a new round", async () => {
    // The receiver fails the first try and takes every later one.
    const receiver = stubReceiver("https://receiver.example/cb", (n) => new Response(null, { status: n === 0 ? 502 : 204 }));
    onTestFinished(receiver.restore);
    const { admin } = await createOrg();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const id = await dispatch(admin, { callback_url: "https://receiver.example/cb" });
    await call("POST", `/v1/runs/${id}/cancel`, { token: admin, body: {} });
    await vi.waitFor(async () => expect((await call("GET", `/v1/runs/${id}`, { token: admin })).body.callback.attempts).toBe(1), { timeout: 10_000, interval: 50 });
    // Its tries ran out: marked so here rather than waited out (test/workers/callbacks.test.ts waits them out).
    await env.DB.prepare("UPDATE callback_deliveries SET status = 'failed', attempts = ? WHERE run_id = ?").bind(DEFAULTS.callbackMaxAttempts, id).run();
    const before = (await page(`/dash/runs/${id}`, { cookie: await signIn(admin) })).text;
    expect(before).toContain(`<button type="submit" aria-label="Retry the completion callback of run ${id}">Retry the failed callback</button>`);
    expect((await page(`/dash/runs/${id}`, { cookie: await signIn(member) })).text).not.toContain("Retry the failed callback");
    const retried = await page(`/dash/runs/${id}/redeliver`, { cookie: await signIn(admin), form: {} });
    expect(retried.status).toBe(303);
    await vi.waitFor(async () => expect((await call("GET", `/v1/runs/${id}`, { token: admin })).body.callback.status).toBe("delivered"), { timeout: 10_000, interval: 50 });
    expect((await page(`/dash/runs/${id}`, { cookie: await signIn(admin) })).text).toContain("Send the callback again");
  });
});

describe("what the run's page reads from the API", () => {
  it("GET /v1/runs/:id has the run's state history; GET …/events?order=newest pages back from the newest event to #1", { timeout: 60_000 }, async () => {
    const { admin, id } = await sharedRunOf141Events();
    const run = (await call("GET", `/v1/runs/${id}`, { token: admin })).body;
    expect(run.state_history.map((h: { to: string }) => h.to)).toEqual(["claimed", "implementing", "completed"]);
    expect(run.state_history[2]).toMatchObject({ from: "implementing", attempt: 1, reason: "the daemon reported a result for review" });
    expect(run.state_history_dropped).toBe(0);
    const newest = (await call("GET", `/v1/runs/${id}/events?order=newest&limit=100`, { token: admin })).body;
    expect(newest.events.map((e: { seq: number }) => e.seq)).toEqual(Array.from({ length: 100 }, (_, i) => 141 - i));
    expect(newest.next_cursor).toBe("42");
    const rest = (await call("GET", `/v1/runs/${id}/events?order=newest&limit=100&cursor=42`, { token: admin })).body;
    expect(rest.events.map((e: { seq: number }) => e.seq)).toEqual(Array.from({ length: 41 }, (_, i) => 41 - i));
    expect(rest.next_cursor).toBeNull();
    expect((await call("GET", `/v1/runs/${id}/events?order=sideways`, { token: admin })).status).toBe(400);
  });

  it("a run keeps its newest RUN_STATE_HISTORY_MAX changes of state and counts the ones it let go", () => {
    const config = { ...DEFAULTS, runStateHistoryMax: 2 };
    let run = newQueuedRun({ id: "run_000000000000000000000001", orgId: "org_1", brief: "b", repository: null, labels: [], priority: 0, launch: { protocol: "process", command: ["x"], image: null, env: {} }, callbackUrl: null, metadata: {}, createdAtMs: 0 }, 0);
    for (const [i, command] of ([{ type: "pause", hold: true, reason: "one" }, { type: "resume", by: "operator" }, { type: "pause", hold: true, reason: "two" }] as const).entries()) {
      const d = decide(run, command, 1_000 * (i + 1), config);
      if (!d.ok) throw new Error(d.error.message);
      run = d.run;
    }
    expect(run.stateHistory).toEqual([
      { from: "paused", to: "queued", reason: "resumed", attempt: 0, atMs: 2_000 },
      { from: "queued", to: "paused", reason: "two", attempt: 0, atMs: 3_000 },
    ]);
    expect(run.stateHistoryDropped).toBe(1);
  });
});
