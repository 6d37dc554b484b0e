// The console's runs pages as an operator sees them: the runs list (title, state in words and an
// icon, duration, repository, project, machine, attempt; filters, search by id, paging), the queue
// with briefs, the live regions and their script, the runners list and a runner's page
// (README.md, "Dashboard").

import { describe, expect, it } from "vitest";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import worker from "../../src/index";
import { admitReadyIssue, createProject, installRealAutopilotWithTracker } from "./autopilot-fakes";
import { page, pageRequest, signIn } from "./dashboard-helpers";
import { finishRun } from "./events-helpers";
import { call, claim, createOrg, dispatch, registerRunner } from "./helpers";

/** The HTML of the element whose opening tag starts with `open`, up to the first closing tag of its kind (regions here hold no nested one). */
function region(html: string, open: string): string {
  const start = html.indexOf(open);
  if (start < 0) return "";
  const tag = open.slice(1).split(/[ >]/)[0];
  return html.slice(start, html.indexOf(`</${tag}>`, start));
}

/** A page as the dashboard renders it with these Worker variables in place (by default two rows a page, DASHBOARD_ROWS_MAX=2, to see paging). */
async function pageWith(path: string, cookie: string, vars: Record<string, string> = { DASHBOARD_ROWS_MAX: "2" }): Promise<string> {
  const ctx = createExecutionContext();
  const res = await worker.fetch(pageRequest(path, { cookie }), { ...env, ...vars }, ctx);
  await waitOnExecutionContext(ctx);
  expect(res.status, path).toBe(200);
  return res.text();
}

describe("the runs pages", () => {
  it("the runs list shows each run's brief, state as an icon and a word, duration, repository, machine and attempt", async () => {
    const { admin } = await createOrg();
    const done = await dispatch(admin, { brief: "Fix the flaky login test\n\nIt fails one run in ten.", repository: { url: "https://github.com/acme/web.git" } });
    const { runner } = await finishRun(admin, done);
    const waiting = await dispatch(admin, { brief: "Bump the parser", labels: ["gpu"] });
    const session = await signIn(admin);

    const runs = (await page("/dash/runs", { cookie: session })).text;
    const row = region(runs, `<tr data-run="${done}"`);
    expect(row).toContain(`<a href="/dash/runs/${done}">Fix the flaky login test</a>`);
    expect(row).toMatch(/<span class="state ok" data-state="completed"><span aria-hidden="true">✓<\/span> completed<\/span>/);
    expect(row).toMatch(/<td data-label="Duration">\d+s<\/td>/);
    expect(row).toContain('<td data-label="Repository">github.com/acme/web</td>');
    expect(row).toContain(`<a href="/dash/runners/${runner.machineId}">${runner.machineId}</a>`);
    expect(row).toContain('<td data-label="Attempt">1</td>');
    const queued = region(runs, `<tr data-run="${waiting}"`);
    expect(queued).toContain('data-state="queued"><span aria-hidden="true">○</span> queued</span>');
    expect(queued).toContain('<td data-label="Duration">—</td>');

    // The queue shows briefs too.
    const queue = (await page("/dash", { cookie: session })).text;
    expect(region(queue, '<section id="queue"')).toContain(`<a href="/dash/runs/${waiting}">Bump the parser</a>`);

    // The navigation marks where the reader is: the section's own page, or a page within it.
    const current = (html: string) => [...region(html, '<nav aria-label="Dashboard"').matchAll(/<a [^>]*aria-current="([^"]+)"[^>]*>([^<]+)</g)].map((m) => [m[2], m[1]]);
    expect(current(runs)).toEqual([["Runs", "page"]]);
    expect(current(queue)).toEqual([["Queue", "page"]]);
    expect(current((await page(`/dash/runs/${done}`, { cookie: session })).text)).toEqual([["Runs", "true"]]);
    expect(current((await page(`/dash/runners/${runner.machineId}`, { cookie: session })).text)).toEqual([["Runners", "true"]]);
  });

  it("the runs list filters by state, label and machine, keeps them in its form and its Older runs link, and pages to the end", async () => {
    const { admin } = await createOrg();
    const gpu = [await dispatch(admin, { labels: ["gpu"] }), await dispatch(admin, { labels: ["gpu"] }), await dispatch(admin, { labels: ["gpu"] })];
    const plain = await dispatch(admin);
    const box = await registerRunner(admin, { name: "box" });
    expect((await claim(box.token)).body.run_id).toBe(plain);
    const session = await signIn(admin);

    const first = await pageWith("/dash/runs?state=queued&label=gpu", session);
    expect(first).toContain('<option value="queued" selected="">queued</option>');
    expect(first).toContain('name="label" value="gpu"');
    expect(region(first, '<section id="runs"')).not.toContain(plain);
    const older = /<a href="([^"]+)" rel="next">Older runs<\/a>/.exec(first)?.[1].replaceAll("&amp;", "&");
    expect(older).toMatch(/^\/dash\/runs\?state=queued&label=gpu&cursor=/);
    const second = await pageWith(older!, session);
    const listed = (html: string) => [...region(html, '<section id="runs"').matchAll(/<tr data-run="(run_[0-9a-f]+)"/g)].map((m) => m[1]);
    expect([...listed(first), ...listed(second)]).toEqual([...gpu].reverse());
    expect(second).not.toContain(`rel="next"`);
    expect(second).toContain('<a href="/dash/runs?state=queued&amp;label=gpu">Newest runs</a>');

    const byMachine = (await page(`/dash/runs?machine_id=${box.machineId}`, { cookie: session })).text;
    expect(listed(byMachine)).toEqual([plain]);
    const none = (await page("/dash/runs?label=cuda", { cookie: session })).text;
    expect(none).toContain("No run matches these filters.");
  });

  it("the runs list filters by autopilot project, each run titled with its issue's title", async () => {
    const fake = installRealAutopilotWithTracker();
    const { admin } = await createOrg();
    const project = await createProject(admin);
    const admitted = await admitReadyIssue(fake, project.id, 12);
    const other = await dispatch(admin);
    const session = await signIn(admin);
    const html = (await page(`/dash/runs?project_id=${project.id}`, { cookie: session })).text;
    const runs = region(html, '<section id="runs"');
    expect(runs).toContain(`<a href="/dash/runs/${admitted}">${fake.tracker(project.id).issues.get(12)!.facts.title}</a>`);
    expect(runs).toContain(`<a href="/dash/runs?project_id=${project.id}">${project.id}</a>`);
    expect(runs).not.toContain(other);
    // The project filter offers the organization's projects by name, the one filtered by chosen.
    const form = region(html, '<form method="get" action="/dash/runs" id="run-filters"');
    expect(form).toContain(`<option value="${project.id}" selected="">hello-world autopilot</option>`);
    expect(region(form, '<select name="project_id"')).toContain('<option value="">any project</option>');
    // An organization without projects is offered no project filter; an id in the address is still kept.
    const plain = await createOrg();
    const plainSession = await signIn(plain.admin);
    expect((await page("/dash/runs", { cookie: plainSession })).text).not.toContain('name="project_id"');
    const gone = (await page(`/dash/runs?project_id=${project.id}`, { cookie: plainSession })).text;
    expect(gone).toContain(`<option value="${project.id}" selected="">${project.id}</option>`);

    // The issue's ticket page links to the issue on GitHub, as the API's issue_url gives it.
    const ticketPage = (await page(`/dash/autopilot/${project.id}/tickets/12`, { cookie: session })).text;
    expect(ticketPage).toContain('<a id="tracker-issue" href="https://github.com/Codertocat/Hello-World/issues/12" rel="noreferrer">#12 on GitHub</a>');

    // The run's page links its project, and shows its brief (the issue's title and Agent Brief) line by line.
    const runPage = (await page(`/dash/runs/${admitted}`, { cookie: session })).text;
    expect(runPage).toContain(`<dt>Autopilot project</dt><dd><a href="/dash/autopilot/${project.id}">${project.id}</a></dd>`);
    const issueUrl = fake.tracker(project.id).issues.get(12)!.facts.url;
    expect(runPage).toContain(`<dt>Issue</dt><dd><a href="/dash/autopilot/${project.id}/tickets/12">#12</a> <a class="muted" href="${issueUrl}" rel="noreferrer">on GitHub</a></dd>`);
    const brief = region(runPage, '<p class="brief"');
    expect(brief).toContain(fake.tracker(project.id).issues.get(12)!.facts.title);
    expect(brief.split("\n").length).toBeGreaterThan(2);
  });

  it("searching by run id opens an exact id's page and says when an id is malformed", async () => {
    const { admin } = await createOrg();
    const id = await dispatch(admin);
    const session = await signIn(admin);
    const found = await page(`/dash/runs?run=${id}`, { cookie: session });
    expect(found.status).toBe(303);
    expect(found.headers.get("Location")).toBe(`/dash/runs/${id}`);
    const malformed = await page("/dash/runs?run=run_123", { cookie: session });
    expect(malformed.status).toBe(400);
    expect(malformed.text).toContain('<p id="find-run-problem" class="error">&quot;run_123&quot; is not a run id: a run id is run_ followed by 24 hexadecimal digits (0-9, a-f).</p>');
    expect(malformed.text).toContain('<label>Run id <input type="text" name="run" value="run_123"');
    // A malformed filter is the API's refusal, said beside the form that keeps what was typed,
    // the field marked; no run is listed under filters that were not applied.
    const bad = await page("/dash/runs?machine_id=box&label=gpu", { cookie: session });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('<input type="text" name="machine_id" value="box" placeholder="mch_…" aria-invalid="true" aria-describedby="run-filters-problem"/>');
    expect(bad.text).toContain('<input type="text" name="label" value="gpu" placeholder="gpu"/>');
    expect(bad.text).toContain('<p id="run-filters-problem" class="error" role="alert">These filters cannot be used: query machine_id: must be a machine id like mch_&lt;24 hex digits&gt;</p>');
    expect(bad.text).not.toContain(`data-run="${id}"`);
    const badCursor = await page("/dash/runs?cursor=garbage", { cookie: session });
    expect(badCursor.status).toBe(400);
    expect(badCursor.text).toContain("That page of older runs cannot be read: query cursor:");
  });

  it("the queue, runs and runners pages carry live regions and the live-lists script, which is served", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { name: "box" });
    const session = await signIn(admin);
    const regions: [string, string[]][] = [
      ["/dash", ["queue", "recent-runs"]],
      ["/dash/runs", ["runs"]],
      ["/dash/runners", ["runners"]],
      [`/dash/runners/${runner.machineId}`, ["runner", "runs"]],
    ];
    for (const [path, ids] of regions) {
      const html = (await page(path, { cookie: session })).text;
      for (const id of ids) expect(html, `${path} #${id}`).toMatch(new RegExp(`<[a-z]+ id="${id}" data-live`));
      expect(html, path).toContain('<p id="live-status" role="status" class="muted">');
      expect(html, path).toContain('<script src="/dash/assets/live-lists.js" defer="" data-poll-ms="5000" data-failures-max="3"></script>');
    }
    // The interval and the failures allowed are the deployment's (DASHBOARD_LIVE_POLL_MS, DASHBOARD_LIVE_FAILURES_MAX).
    const configured = await pageWith("/dash/runs", session, { DASHBOARD_LIVE_POLL_MS: "2000", DASHBOARD_LIVE_FAILURES_MAX: "7" });
    expect(configured).toContain('data-poll-ms="2000" data-failures-max="7"');
    const script = await page("/dash/assets/live-lists.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("Content-Type")).toContain("text/javascript");
    expect(script.text).toContain('document.querySelectorAll("[data-live][id]")');
    expect(script.text).toContain("Live updates stopped");
    expect(script.text).toContain("document.hidden");
  });
});

describe("a live refresh", () => {
  it("of the queue answers its lists without reading the last day's events for the charts again", async () => {
    const { admin } = await createOrg();
    const id = await dispatch(admin, { brief: "Bump the parser" });
    const session = await signIn(admin);
    const request = pageRequest("/dash", { cookie: session });
    request.headers.set("Docket-Live-Refresh", "1");
    const res = await exports.default.fetch(request);
    const html = await res.text();
    expect(res.status).toBe(200);
    expect(region(html, '<section id="queue"')).toContain(`<a href="/dash/runs/${id}">Bump the parser</a>`);
    expect(html).not.toContain('aria-labelledby="chart-depth-title');
    expect((await page("/dash", { cookie: session })).text).toContain('aria-labelledby="chart-depth-title');
    expect((await page("/dash/assets/live-lists.js")).text).toContain('"Docket-Live-Refresh": "1"');
  });
});

describe("the runners pages", () => {
  it("two runners with the same name are told apart by their ids; a lone name shows none", async () => {
    const { admin } = await createOrg();
    const a = await registerRunner(admin, { name: "builder" });
    const b = await registerRunner(admin, { name: "builder" });
    const c = await registerRunner(admin, { name: "solo" });
    const session = await signIn(admin);
    const html = (await page("/dash/runners", { cookie: session })).text;
    expect(html).toContain(`<a href="/dash/runners/${a.machineId}">builder (${a.machineId})</a>`);
    expect(html).toContain(`<a href="/dash/runners/${b.machineId}">builder (${b.machineId})</a>`);
    expect(html).toContain(`<a href="/dash/runners/${c.machineId}">solo</a>`);
  });

  it("a runner's page shows its labels, protocols, version, last contact and the runs it ran", async () => {
    const { admin } = await createOrg();
    const mine = await dispatch(admin, { brief: "Ran on the box" });
    const { runner } = await finishRun(admin, mine);
    const elsewhere = await dispatch(admin, { brief: "Still queued" });
    const session = await signIn(admin);
    const html = (await page(`/dash/runners/${runner.machineId}`, { cookie: session })).text;
    expect(html).toContain(`<h1>Runner box <span class="muted">${runner.machineId}</span></h1>`);
    const facts = region(html, '<dl id="runner"');
    expect(facts).toContain("<dt>Protocols</dt><dd>process</dd>");
    expect(facts).toContain("<dt>CLI version</dt><dd>0.1.0</dd>");
    expect(facts).toContain("● connected");
    const runs = region(html, '<section id="runs"');
    expect(runs).toContain(`<a href="/dash/runs/${mine}">Ran on the box</a>`);
    expect(runs).not.toContain(elsewhere);
    const unknown = await page("/dash/runners/mch_" + "0".repeat(24), { cookie: session });
    expect(unknown.status).toBe(404);
  });

  it("deregistering needs its confirmation box ticked: unticked it changes nothing", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { name: "box" });
    const session = await signIn(admin);
    const html = (await page(`/dash/runners/${runner.machineId}`, { cookie: session })).text;
    expect(html).toContain('<input type="checkbox" name="confirm" value="yes" required=""/> Deregister box: its token stops working and it takes no more runs.');
    expect(html).toContain(`aria-label="Deregister box (${runner.machineId})">Deregister</button>`);
    const unticked = await page(`/dash/runners/${runner.machineId}/revoke`, { cookie: session, form: {} });
    expect(unticked.status).toBe(400);
    expect(unticked.text).toContain("Tick the confirmation box");
    expect((await call("GET", "/v1/runners", { token: admin })).body.runners).toHaveLength(1);
    const ticked = await page(`/dash/runners/${runner.machineId}/revoke`, { cookie: session, form: { confirm: "yes" } });
    expect(ticked.status).toBe(303);
    expect((await call("GET", "/v1/runners", { token: admin })).body.runners).toEqual([]);
    // Its page still reads, saying when it was deregistered.
    const after = (await page(`/dash/runners/${runner.machineId}`, { cookie: session })).text;
    expect(after).toContain("<dt>Deregistered</dt>");
    expect(after).toContain("○ not connected");
  });
});
