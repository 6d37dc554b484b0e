// The dashboard at /dash, from outside: sign-in and its cookie, what the pages show, actions
// through the API, CSRF-safe forms (README.md, "Dashboard").

import { describe, expect, it, onTestFinished, vi } from "vitest";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { runEngine } from "../../src/builds/run-engine";
import worker from "../../src/index";
import { ORIGIN, page, signIn } from "./dashboard-helpers";
import { credits, dispatchBuild, finalReport, readyToBuild, reservationInCostReview, runToEnd, waitForJob } from "./builds-helpers";
import { stubReceiver } from "./events-helpers";
import { attemptCall, call, claim, createOrg, dispatch, registerRunner, report, sleep } from "./helpers";

/** The HTML of the element whose opening tag is `open` (`<table id="holds">`), up to its closing `</tag>`. */
function section(html: string, open: string): string {
  const start = html.indexOf(open);
  if (start < 0) return "";
  const tag = open.slice(1).split(/[ >]/)[0];
  return html.slice(start, html.indexOf(`</${tag}>`, start));
}

describe("the dashboard", () => {
  it("without a session every page sends the browser to sign-in; a wrong token is refused there with the reason", async () => {
    for (const path of ["/dash", "/dash/runs", "/dash/runners", "/dash/credits", "/dash/tokens"]) {
      const res = await page(path);
      expect(res.status, path).toBe(303);
      expect(res.headers.get("Location")).toBe("/dash/sign-in");
    }
    const form = await page("/dash/sign-in");
    expect(form.status).toBe(200);
    expect(form.text).toContain('<label for="token">Member token</label>');
    const bad = await page("/dash/sign-in", { form: { token: "dkt_m_" + "0".repeat(64) } });
    expect(bad.status).toBe(401);
    expect(bad.text).toContain("That token does not sign in");
    expect(bad.headers.get("Set-Cookie")).toBeNull();
  });

  it("signing in sets an HttpOnly, Secure, SameSite=Strict cookie; the queue shows each run's reason to wait in dispatch order", async () => {
    const { admin } = await createOrg();
    const res = await page("/dash/sign-in", { form: { token: admin } });
    const cookie = res.headers.get("Set-Cookie") ?? "";
    // A session id, not the member token (dashboard-sessions.test.ts).
    expect(cookie).toMatch(/^docket_session=[0-9a-f]{64};/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/Secure/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/dash/);
    const session = cookie.split(";")[0];
    const low = await dispatch(admin, { labels: ["gpu"] });
    const high = await dispatch(admin, { labels: ["gpu"], priority: 5 });
    const queue = await page("/dash", { cookie: session });
    expect(queue.status).toBe(200);
    expect(queue.text.indexOf(high)).toBeLessThan(queue.text.indexOf(low));
    expect(queue.text).toContain("no runner is connected: one with protocol process and labels gpu would take it");
    // The three charts, each with a title and description.
    for (const id of ["chart-depth", "chart-started", "chart-ended"]) expect(queue.text).toContain(`aria-labelledby="${id}-title ${id}-desc"`);
    expect(queue.text).toMatch(/<title id="chart-depth-title">Queue depth \(highest in the hour\), per hour over the last day \(peak 2\)<\/title>/);
    expect(queue.headers.get("Content-Security-Policy")).toContain("frame-ancestors 'none'");
  });

  it("a run's page shows its attempts as an SVG timeline, the patch as a diff, its cost and callback", async () => {
    const receiver = stubReceiver("https://receiver.example/cb", () => new Response("ok"));
    onTestFinished(receiver.restore);
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const id = await dispatch(admin, { callback_url: "https://receiver.example/cb" });
    const grant = await claim(runner.token);
    await attemptCall(runner.token, id, 1, "launched", { sandbox_id: "sbx-1" });
    const patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old line\n+new line";
    expect((await report(grant.body.attempt_token, id, { seq: 1, phase: "implementing", lines: ["working"] })).status).toBe(200);
    const final = await report(grant.body.attempt_token, id, {
      seq: 2,
      final: { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch, source_revision: null, model: null, limitations: [] }, cost_cents: 123 },
    });
    expect(final.status).toBe(200);
    const session = await signIn(admin);
    const res = await page(`/dash/runs/${id}`, { cookie: session });
    expect(res.status).toBe(200);
    expect(res.text).toContain('<span id="run-state" class="state" aria-live="polite">completed</span>');
    expect(res.text).toContain('<span class="del">-old line</span>');
    expect(res.text).toContain('<span class="add">+new line</span>');
    expect(res.text).toContain('<span class="hunk">@@ -1 +1 @@</span>');
    expect(res.text).toContain("$1.23");
    expect(res.text).toContain('id="timeline-title"');
    expect(res.text).toMatch(/<g data-attempt="1">/);
    for (const kind of ["claimed", "launched", "report", "end"]) expect(res.text).toContain(`data-kind="${kind}"`);
    expect(res.text).toContain("https://receiver.example/cb");
    // An ended run has no cancel button.
    expect(res.text).not.toContain("Cancel run");
    // The queue page's charts count the run as started and ended this hour, once its events are stored.
    let charts = "";
    for (let i = 0; i < 50 && !charts.includes("Runs ended, per hour over the last day (peak 1, total 1)"); i++) {
      await sleep(100);
      charts = (await page("/dash", { cookie: session })).text;
    }
    expect(charts).toContain("Runs started, per hour over the last day (peak 1, total 1)");
    expect(charts).toContain("Runs ended, per hour over the last day (peak 1, total 1)");
    expect(charts).toContain("Queue depth (highest in the hour), per hour over the last day (peak 1)");
  });

  it("cancel goes through the API; a form from another origin is refused and changes nothing", async () => {
    const { admin } = await createOrg();
    const id = await dispatch(admin);
    const session = await signIn(admin);
    const forged = await page(`/dash/runs/${id}/cancel`, { cookie: session, form: { reason: "x" }, origin: "https://evil.example" });
    expect(forged.status).toBe(403);
    expect((await call("GET", `/v1/runs/${id}`, { token: admin })).body.state).toBe("queued");
    const cancelled = await page(`/dash/runs/${id}/cancel`, { cookie: session, form: { reason: "not needed", confirm: "yes" } });
    expect(cancelled.status).toBe(303);
    expect(cancelled.headers.get("Location")).toBe(`/dash/runs/${id}?done=cancel+requested`);
    const run = (await call("GET", `/v1/runs/${id}`, { token: admin })).body;
    expect(run.state).toBe("cancelled");
    expect(run.stop_request).toMatchObject({ reason: "not needed" });
    // Cancelling again: the run is already ended, its page says so.
    const again = await page(`/dash/runs/${id}`, { cookie: session });
    expect(again.text).toContain(">cancelled</span>");
  });

  it("runners show labels, protocols, CLI version and last seen; tokens and machines have revoke buttons that revoke through the API", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { name: "rack-7", labels: ["linux", "gpu"] });
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member", name: "ci" } })).body;
    const session = await signIn(admin);
    const runners = await page("/dash/runners", { cookie: session });
    expect(runners.text).toContain("rack-7");
    expect(runners.text).toContain('<td data-label="Labels">gpu, linux</td>');
    expect(runners.text).toContain('<td data-label="CLI">0.1.0</td>');
    expect(runners.text).toContain("connected");
    const tokens = await page("/dash/tokens", { cookie: session });
    expect(tokens.text).toContain(`action="/dash/tokens/${member.id}/revoke"`);
    expect(tokens.text).toContain(`action="/dash/runners/${runner.machineId}/revoke"`);
    expect((await page(`/dash/tokens/${member.id}/revoke`, { cookie: session, form: { confirm: "yes" } })).status).toBe(303);
    expect((await call("GET", "/v1/runs", { token: member.token })).status).toBe(401);
    expect((await page(`/dash/runners/${runner.machineId}/revoke`, { cookie: session, form: { confirm: "yes" } })).status).toBe(303);
    expect((await call("GET", "/v1/runners", { token: admin })).body.runners).toEqual([]);
    // A member without the admin role is told plainly that tokens are for admins, and cannot revoke.
    const plain = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const plainSession = await signIn(plain);
    const plainTokens = (await page("/dash/tokens", { cookie: plainSession })).text;
    expect(plainTokens).toContain("Tokens are for admins");
    expect(plainTokens).not.toContain("this call needs an admin member token");
    const refused = await page(`/dash/tokens/${member.id}/revoke`, { cookie: plainSession, form: { confirm: "yes" } });
    expect(refused.status).toBe(403);
  });

  it("the credits page shows the balance, holds and cost review", async () => {
    const { admin } = await createOrg();
    expect((await call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: 5000, note: "start" } })).status).toBe(201);
    const session = await signIn(admin);
    const res = await page("/dash/credits", { cookie: session });
    expect(res.status).toBe(200);
    expect(res.text).toContain("<th scope=\"row\">Granted</th><td>$50.00</td>");
    expect(res.text).toContain("Cost review and reconciliation");
  });

  it("an admin resolves a build job in cost review from the credits page; a member, a bad cost or a second resolution changes nothing", async () => {
    const { admin, requestId, runner } = await readyToBuild({ creditCents: 10_000 });
    const job = (await dispatchBuild(admin, requestId, "dash-review")).body;
    await runToEnd(runner!.token, job.run_id, finalReport(3_100));
    await waitForJob(admin, job.id, (j) => j.status === "cost_review");
    const session = await signIn(admin);
    const before = await page("/dash/credits", { cookie: session });
    expect(before.text).toContain(`action="/dash/build-jobs/dash-review/resolve"`);

    // A member's session is not offered the form; a hand-made post is refused by the API and nothing moves.
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const memberSession = await signIn(member);
    const memberView = await page("/dash/credits", { cookie: memberSession });
    expect(memberView.text).toContain('<tr data-job="dash-review">');
    expect(memberView.text).not.toContain("/resolve");
    const refused = await page("/dash/build-jobs/dash-review/resolve", { cookie: memberSession, form: { cost_cents: "3100", note: "invoice" } });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain("this call needs an admin member token");
    // A cost that is not a whole number of cents is the API's validation error, shown as such.
    const bad = await page("/dash/build-jobs/dash-review/resolve", { cookie: session, form: { cost_cents: "31.5", note: "invoice" } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("cost_cents");
    expect(await credits(admin)).toMatchObject({ held_cents: 2_500, spent_cents: 0, available_cents: 7_500 });

    const resolved = await page("/dash/build-jobs/dash-review/resolve", { cookie: session, form: { cost_cents: "3100", note: "provider invoice checked" } });
    expect(resolved.status).toBe(303);
    expect(resolved.headers.get("Location")).toBe("/dash/credits?done=build+job+dash-review+resolved");
    expect((await call("GET", `/v1/build-jobs/${job.id}`, { token: admin })).body).toMatchObject({
      status: "settled",
      settled_cents: 2_500,
      charged_cents: 600,
      resolution: { note: "provider invoice checked" },
    });
    expect(await credits(admin)).toMatchObject({ held_cents: 0, spent_cents: 3_100, available_cents: 6_900 });
    const after = await page("/dash/credits?done=build+job+dash-review+resolved", { cookie: session });
    expect(after.text).toContain("Done: build job dash-review resolved.");
    // The ledger shows each entry's note: the resolution's is readable there.
    expect(after.text).toContain('<th scope="col">Note</th>');
    expect(after.text).toContain('<td data-label="Note" class="note">resolved: provider invoice checked</td>');
    expect(after.text).not.toContain(`action="/dash/build-jobs/dash-review/resolve"`);
    const twice = await page("/dash/build-jobs/dash-review/resolve", { cookie: session, form: { cost_cents: "3100", note: "again" } });
    expect(twice.status).toBe(409);
    expect(twice.text).toContain("job_not_held");
    expect((await credits(admin)).spent_cents).toBe(3_100);
  });

  it("an admin resolves an autopilot run's reservation in cost review from the credits page", async () => {
    const runId = `run_${"b".repeat(24)}`;
    const { admin, projectId } = await reservationInCostReview("dash-reservations", runId, { grantCents: 1_000, reservedCents: 100 });
    const session = await signIn(admin);
    const action = `/dash/autopilot/projects/${projectId}/reservations/${runId}/resolve`;
    expect((await page("/dash/credits", { cookie: session })).text).toContain(`action="${action}"`);
    const unknown = await page(`/dash/autopilot/projects/${projectId}/reservations/not-a-run/resolve`, { cookie: session, form: { cost_cents: "50", note: "x" } });
    expect(unknown.status).toBe(404);

    const resolved = await page(action, { cookie: session, form: { cost_cents: "50", note: "invoice" } });
    expect(resolved.status).toBe(303);
    const listed = (await call("GET", `/v1/autopilot/projects/${projectId}/reservations`, { token: admin })).body.reservations;
    expect(listed).toEqual([expect.objectContaining({ run_id: runId, status: "settled", settled_cents: 50, released_cents: 50, resolution: expect.objectContaining({ note: "invoice" }) })]);
    expect(await credits(admin)).toMatchObject({ held_cents: 0, spent_cents: 50 });
  });

  it("wrong tokens at the sign-in form count against the address as in the API: past the limit it is 429 rate_limited", async () => {
    // The low RATE_LIMIT_TEST_* bindings of vitest.config.ts (5 a minute), as in rate-limit.test.ts.
    const lowEnv = { ...env, RATE_LIMIT_ADDRESS: env.RATE_LIMIT_TEST_ADDRESS, RATE_LIMIT_MEMBER: env.RATE_LIMIT_TEST_MEMBER };
    const guess = async () => {
      const body = new URLSearchParams({ token: "dkt_m_" + "1".repeat(64) }).toString();
      const headers = { "Content-Type": "application/x-www-form-urlencoded", Origin: ORIGIN, "CF-Connecting-IP": "203.0.113.9" };
      const ctx = createExecutionContext();
      const res = await worker.fetch(new Request(`${ORIGIN}/dash/sign-in`, { method: "POST", headers, body }), lowEnv, ctx);
      await waitOnExecutionContext(ctx);
      return { status: res.status, text: await res.text() };
    };
    const statuses: number[] = [];
    for (let i = 0; i < 15 && !statuses.includes(429); i++) statuses.push((await guess()).status);
    expect(statuses.filter((s) => s === 401).length).toBeGreaterThanOrEqual(5);
    expect(statuses.at(-1)).toBe(429);
    expect((await guess()).text).toContain("too many failed authentications from this address");
  });

  it("pages run only this origin's script files: script-src has no 'unsafe-inline', and a run's live events come from /dash/assets/live-events.js", async () => {
    const { admin } = await createOrg();
    const id = await dispatch(admin);
    const session = await signIn(admin);
    const run = await page(`/dash/runs/${id}`, { cookie: session });
    const csp = run.headers.get("Content-Security-Policy") ?? "";
    const scriptSrc = csp.split(";").map((d) => d.trim()).find((d) => d.startsWith("script-src"));
    expect(scriptSrc).toBe("script-src 'self'");
    expect(csp).not.toMatch(/default-src[^;]*'unsafe-inline'/);
    expect(run.text).toContain('<script src="/dash/assets/live-events.js"></script>');
    expect(run.text).not.toMatch(/<script>/);
    const script = await page("/dash/assets/live-events.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("Content-Type")).toMatch(/^text\/javascript/);
    expect(script.text).toContain("new EventSource(list.dataset.stream");
    expect((await page("/dash/assets/nope.js")).status).toBe(404);
  });

  it("signing out clears the cookie", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const out = await page("/dash/sign-out", { cookie: session, form: {} });
    expect(out.status).toBe(303);
    expect(out.headers.get("Set-Cookie")).toMatch(/^docket_session=;.*Max-Age=0/);
  });
});

describe("the dashboard as a new user meets it", () => {
  it("a member without the admin role is offered no admin action: no resolve form, no Deregister, no Tokens link; an admin is offered each", async () => {
    const { admin, requestId, runner } = await readyToBuild({ creditCents: 10_000 });
    const job = (await dispatchBuild(admin, requestId, "role-review")).body;
    await runToEnd(runner!.token, job.run_id, finalReport(3_100));
    await waitForJob(admin, job.id, (j) => j.status === "cost_review");
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const [adminSession, memberSession] = [await signIn(admin), await signIn(member)];

    const adminCredits = (await page("/dash/credits", { cookie: adminSession })).text;
    expect(adminCredits).toContain('action="/dash/build-jobs/role-review/resolve"');
    expect(adminCredits).toContain('<a href="/dash/tokens">Tokens</a>');
    const memberCredits = (await page("/dash/credits", { cookie: memberSession })).text;
    expect(section(memberCredits, '<table id="review"')).toContain('<tr data-job="role-review">');
    expect(memberCredits).not.toContain("/resolve");
    expect(memberCredits).not.toContain('<a href="/dash/tokens">');

    expect((await page("/dash/runners", { cookie: adminSession })).text).toContain(`action="/dash/runners/${runner!.machineId}/revoke"`);
    const memberRunners = (await page("/dash/runners", { cookie: memberSession })).text;
    expect(memberRunners).toContain(`<tr data-runner="${runner!.machineId}">`);
    expect(memberRunners).not.toContain("/revoke");
    expect(memberRunners).not.toContain("Deregister");

    const memberTokens = await page("/dash/tokens", { cookie: memberSession });
    expect(memberTokens.status).toBe(200);
    expect(memberTokens.text).toContain("Tokens are for admins");
    expect(memberTokens.text).not.toContain("this call needs an admin member token");
    expect(memberTokens.text).not.toContain("/revoke");

    // A run's page: sending the callback again is an admin's action too.
    const receiver = stubReceiver("https://receiver.example/cb", () => new Response("ok"));
    onTestFinished(receiver.restore);
    const run = await dispatch(admin, { callback_url: "https://receiver.example/cb" });
    await call("POST", `/v1/runs/${run}/cancel`, { token: admin, body: {} });
    await vi.waitFor(() => expect(receiver.received.length).toBeGreaterThan(0), { timeout: 10_000, interval: 50 });
    expect((await page(`/dash/runs/${run}`, { cookie: adminSession })).text).toContain("Send the callback again");
    expect((await page(`/dash/runs/${run}`, { cookie: memberSession })).text).not.toContain("Send the callback again");
  });

  it("the credits page's Holds list every build job that holds credit, with its status, so they account for Held", async () => {
    const { admin, requestIds, runner } = await readyToBuild({ creditCents: 10_000, requests: 2 });
    // A dispatch that cannot be confirmed keeps its reservation (docs/runbook.md §2).
    const unreachable = vi.spyOn(runEngine, "dispatch").mockRejectedValueOnce(new Error("Network connection lost."));
    onTestFinished(() => unreachable.mockRestore());
    expect((await dispatchBuild(admin, requestIds[0], "held-unconfirmed")).body.status).toBe("dispatch_unconfirmed");
    const reviewed = (await dispatchBuild(admin, requestIds[1], "held-review")).body;
    await runToEnd(runner!.token, reviewed.run_id, finalReport(3_100));
    await waitForJob(admin, reviewed.id, (j) => j.status === "cost_review");
    expect(await credits(admin)).toMatchObject({ held_cents: 5_000 });

    const res = await page("/dash/credits", { cookie: await signIn(admin) });
    expect(res.text).toContain('<tr><th scope="row">Held</th><td>$50.00</td></tr>');
    const holds = section(res.text, '<table id="holds"');
    expect(holds).toMatch(/<tr data-job="held-unconfirmed"><td data-label="Job">held-unconfirmed<\/td><td data-label="Status" class="state">dispatch_unconfirmed<\/td>.*?<td data-label="Reserved">\$25\.00<\/td>/);
    expect(holds).toMatch(/<tr data-job="held-review"><td data-label="Job">held-review<\/td><td data-label="Status" class="state">cost_review<\/td>.*?<td data-label="Reserved">\$25\.00<\/td>/);
    expect(holds.match(/<tr data-job=/g)).toHaveLength(2);
    // Only the one in cost review waits for an admin's resolution.
    const review = section(res.text, '<table id="review"');
    expect(review).toContain('<tr data-job="held-review">');
    expect(review).not.toContain("held-unconfirmed");
  });

  it("on a phone's narrow window: every table sits in a scrolling wrapper, long words break, Deregister is one word named for its runner", async () => {
    const { admin } = await createOrg();
    const name = "build-runner-with-a-rather-long-hostname-eu-west-1-rack-7";
    const runner = await registerRunner(admin, { name });
    await dispatch(admin);
    const session = await signIn(admin);
    for (const path of ["/dash", "/dash/runs", "/dash/runners", "/dash/credits", "/dash/tokens"]) {
      const html = (await page(path, { cookie: session })).text;
      expect(html, path).toContain("<table");
      expect(html.split("<table").length, path).toBe(html.split('<div class="table-wrap"><table').length);
      expect(html, path).toMatch(/\.table-wrap \{ overflow-x: auto;/);
      expect(html, path).toMatch(/body \{[^}]*overflow-wrap: anywhere;/);
    }
    const runners = (await page("/dash/runners", { cookie: session })).text;
    expect(runners).toContain(`<button type="submit" class="danger" aria-label="Deregister ${name} (${runner.machineId})">Deregister</button></form>`);
    expect(runners).not.toContain(`>Deregister ${name}<`);
  });

  it("says what is empty: no paused runs while others exist; an empty chart says it has no data for the last day, not a peak of 1", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const empty = (await page("/dash", { cookie: session })).text;
    for (const id of ["chart-depth", "chart-started", "chart-ended"]) {
      const chart = section(empty, `<svg role="img" aria-labelledby="${id}-title ${id}-desc"`);
      expect(chart, id).toContain("No data for the last day");
      expect(chart, id).toContain('class="y-peak">0</text>');
      expect(chart, id).not.toContain(">1</text>");
    }
    await dispatch(admin);
    const credits = (await page("/dash/credits", { cookie: session })).text;
    expect(credits).toContain("Paused runs (operator holds)</h2><p class=\"muted\">No paused runs.</p>");
    expect(credits).not.toContain("No runs yet.");
  });

  it("an unknown page or run is the dashboard's own HTML 404 page; every page carries an inline icon so none asks for /favicon.ico", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const nope = await page("/dash/nope", { cookie: session });
    expect(nope.status).toBe(404);
    expect(nope.headers.get("Content-Type")).toMatch(/^text\/html/);
    expect(nope.text).toContain("<h1>Not found</h1>");
    expect(nope.text).toContain("No such page: /dash/nope.");
    expect(nope.text).toContain('<nav aria-label="Dashboard">');
    // A path the dashboard does not have, asked without a session, still goes to sign-in first.
    expect((await page("/dash/nope")).status).toBe(303);
    for (const id of ["run_doesnotexist", `run_${"0".repeat(24)}`]) {
      const res = await page(`/dash/runs/${id}`, { cookie: session });
      expect(res.status, id).toBe(404);
      expect(res.headers.get("Content-Type"), id).toMatch(/^text\/html/);
      expect(res.text, id).toContain(`No such run: ${id}.`);
    }
    // Another organization's run is no run of this one.
    const other = await dispatch((await createOrg("other")).admin);
    expect((await page(`/dash/runs/${other}`, { cookie: session })).text).toContain(`No such run: ${other}.`);
    for (const path of ["/dash/sign-in", "/dash", "/dash/nope"]) expect((await page(path, { cookie: session })).text, path).toContain('<link rel="icon" href="data:,"/>');
  });

  it("the ledger shows each entry's note", async () => {
    const { admin } = await createOrg();
    expect((await call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: 5000, note: "first purchase order PO-1182" } })).status).toBe(201);
    const ledger = section((await page("/dash/credits", { cookie: await signIn(admin) })).text, '<table id="ledger"');
    expect(ledger).toContain('<th scope="col">Note</th>');
    expect(ledger).toContain('<td data-label="Note" class="note">first purchase order PO-1182</td>');
  });
});
