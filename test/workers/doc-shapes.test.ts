// docs/protocol.md and the answers cannot drift apart: each `<!-- shape: NAME -->` table there lists
// every field of one answer (a dotted path for a nested object's fields, `[]` for an array's items),
// and this test reads the real answers and compares their fields with that list, both ways.

import { describe, expect, it } from "vitest";
import protocol from "../../docs/protocol.md?raw";
import { createOrgWithSecret, finishRun, stubReceiver, waitFor } from "./events-helpers";
import { createProject, createRequest, readyToBuild, reservationInCostReview } from "./builds-helpers";
import { ADMIN_SECRET, attemptCall, call, claim, dispatch, getRun, registerRunner } from "./helpers";

type Json = Record<string, any>;

/** The field paths a shape table of docs/protocol.md lists, in its order. */
function documented(name: string): string[] {
  const marker = `<!-- shape: ${name} -->`;
  const at = protocol.indexOf(marker);
  if (at < 0) throw new Error(`docs/protocol.md has no ${marker}`);
  const rows: string[] = [];
  for (const line of protocol.slice(at + marker.length).trimStart().split("\n")) {
    if (!line.startsWith("|")) break;
    const field = /^\|\s*`([^`]+)`/.exec(line);
    if (field) rows.push(field[1]);
  }
  if (rows.length === 0) throw new Error(`${marker} is not followed by a table of fields`);
  return rows;
}

/**
 * The field paths of answers, merged: a field's own fields are listed only where the docs list
 * them, so an object the docs describe as a whole (`launch`, `metadata`) is not taken apart.
 */
function answered(values: Json[], doc: string[]): string[] {
  const nested = new Set(doc.map((p) => p.slice(0, Math.max(0, p.lastIndexOf(".")))).filter(Boolean));
  const paths = new Set<string>();
  const walk = (value: Json, prefix: string) => {
    for (const [key, v] of Object.entries(value)) {
      const path = prefix ? `${prefix}.${key}` : key;
      paths.add(path);
      if (Array.isArray(v) && nested.has(`${path}[]`)) v.forEach((item) => walk(item, `${path}[]`));
      else if (v !== null && typeof v === "object" && nested.has(path)) walk(v, path);
    }
  };
  values.forEach((v) => walk(v, ""));
  return [...paths].sort();
}

function expectShape(name: string, values: Json[], without: string[] = []) {
  const doc = documented(name).filter((p) => !without.some((w) => p === w || p.startsWith(`${w}.`) || p.startsWith(`${w}[]`)));
  expect(new Set(doc).size, `${name}: a field listed twice`).toBe(doc.length);
  expect(answered(values, doc), `docs/protocol.md shape "${name}"`).toEqual([...doc].sort());
}

describe("docs/protocol.md lists every field the answers have, and no other", () => {
  it("organization creation, tokens, callback secret rotation", async () => {
    const created = await call("POST", "/v1/orgs", { token: ADMIN_SECRET, body: { name: "docs" } });
    expect(created.status).toBe(201);
    expectShape("org-created", [created.body]);
    const admin = created.body.token.token as string;
    await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration", name: "rack", max_uses: 2 } });
    const tokens = await call("GET", "/v1/tokens", { token: admin });
    expect(tokens.body.tokens.map((t: Json) => t.kind).sort()).toEqual(["member", "registration"]);
    expectShape("token", tokens.body.tokens);
    // A new token is answered as it is listed, plus the token itself.
    const minted = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", name: "ci" } });
    expect(minted.status).toBe(201);
    const { token: secret, ...asListed } = minted.body;
    expect(typeof secret).toBe("string");
    const listed = (await call("GET", "/v1/tokens", { token: admin })).body.tokens.find((t: Json) => t.id === minted.body.id);
    expect(asListed).toEqual(listed);
    expectShape("token", [asListed]);
    const rotated = await call("POST", "/v1/orgs/current/callback-secret/rotate", { token: admin, body: {} });
    expect(rotated.status).toBe(200);
    expectShape("callback-secret-rotated", [rotated.body]);
  });

  it("the run, a listed run, a listed runner", async () => {
    const receiver = stubReceiver("https://receiver.example/docs", () => new Response("ok"));
    try {
      const { admin } = await createOrgWithSecret("docs-runs");
      // One run completes with an artifact and a delivered callback; another carries a stop request.
      const done = await dispatch(admin, { callback_url: "https://receiver.example/docs", repository: { url: "https://github.com/acme/app.git", commit: "4f1c0a9b" } });
      await finishRun(admin, done);
      const stopping = await dispatch(admin);
      const runner = await registerRunner(admin);
      expect((await claim(runner.token, 0)).body.run_id).toBe(stopping);
      await attemptCall(runner.token, stopping, 1, "launched", { sandbox_id: "sbx" });
      expect((await call("POST", `/v1/runs/${stopping}/cancel`, { token: admin, body: { reason: "docs" } })).status).toBe(202);
      // A third is paused with a checkpoint (docs/protocol.md, "Pause and resume").
      const pausing = await dispatch(admin);
      const pausingGrant = (await claim(runner.token, 0)).body;
      await attemptCall(runner.token, pausing, 1, "launched", { sandbox_id: "sbx-p" });
      await call("POST", `/v1/runs/${pausing}/pause`, { token: admin, body: {} });
      const stored = await call("POST", `/v1/runs/${pausing}/attempts/1/checkpoint`, { token: pausingGrant.attempt_token, body: { patch: "", session: { a: 1 } } });
      expect(stored.status).toBe(200);

      const completed = await waitFor("the callback delivered", async () => {
        const run = await getRun(admin, done);
        return run.callback?.status === "delivered" ? run : undefined;
      });
      const runs = [completed, await getRun(admin, stopping), await getRun(admin, pausing)];
      expect(runs.every((r) => r.steps.length === 1) && completed.artifact !== null && runs[1].stop_request !== null && runs[2].checkpoint !== null).toBe(true);
      expectShape("run", runs);
      // The dispatch and cancel answers are the run as GET shows it, callback receipt included.
      const dispatched = await call("POST", "/v1/runs", { token: admin, body: { brief: "b", launch: { command: ["x"] }, callback_url: "https://receiver.example/docs" } });
      const topLevel = documented("run").filter((p) => !p.includes(".") && !p.includes("["));
      expect(Object.keys(dispatched.body).sort()).toEqual(topLevel.sort());
      expect(dispatched.body).toEqual(await getRun(admin, dispatched.body.id));
      const cancelled = await call("POST", `/v1/runs/${dispatched.body.id}/cancel`, { token: admin, body: {} });
      expect(cancelled.status).toBe(200);
      expect(cancelled.body).toEqual(await getRun(admin, dispatched.body.id));

      const events = await call("GET", `/v1/runs/${done}/events?limit=1000`, { token: admin });
      expect(events.body.events.length).toBeGreaterThan(2);
      expectShape("run-event", events.body.events);
      const list = await call("GET", "/v1/runs", { token: admin });
      expect(list.body.runs).toHaveLength(4);
      expectShape("run-list-item", list.body.runs);
      const runners = await call("GET", "/v1/runners", { token: admin });
      expect(runners.body.runners.length).toBeGreaterThan(0);
      expectShape("runner", runners.body.runners);
    } finally {
      receiver.restore();
    }
  });

  it("a project, a build request, a build job and a credit entry: the same on create, change, read and list", async () => {
    const { admin, projectId, requestIds } = await readyToBuild({ creditCents: 10_000, requests: 2, name: "docs-builds" });
    const bare = await call("POST", "/v1/projects", { token: admin, body: { name: "bare", source_url: "https://github.com/acme/bare", launch: { command: ["x"] } } });
    expect(bare.status).toBe(201);
    const projects = [bare.body, (await call("GET", `/v1/projects/${projectId}`, { token: admin })).body];
    expect(bare.body).toEqual((await call("GET", `/v1/projects/${bare.body.id}`, { token: admin })).body);
    expectShape("project", projects);
    expectShape("project", (await call("GET", "/v1/projects", { token: admin })).body.projects);

    const created = await call("POST", `/v1/projects/${await createProject(admin)}/requests`, { token: admin, body: { title: "t" } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual((await call("GET", `/v1/build-requests/${created.body.id}`, { token: admin })).body);
    const planned = await call("PUT", `/v1/build-requests/${requestIds[1]}/plan`, { token: admin, body: { pinned_commit: "a".repeat(40), migration_plan: "p", chain_target: "base" } });
    expect(planned.status).toBe(200);
    expect(planned.body).toEqual((await call("GET", `/v1/build-requests/${requestIds[1]}`, { token: admin })).body);
    expectShape("build-request", [created.body, planned.body]);
    expectShape("build-request", (await call("GET", "/v1/build-requests", { token: admin })).body.requests, ["jobs"]);

    const dispatched = await call("POST", `/v1/build-requests/${requestIds[0]}/dispatch`, { token: admin, body: {}, headers: { "Idempotency-Key": "docs-job" } });
    expect(dispatched.status).toBe(201);
    const { message, ...job } = dispatched.body;
    expect(message).toBeNull();
    const read = (await call("GET", "/v1/build-jobs/docs-job", { token: admin })).body;
    expect(job).toEqual(read);
    expectShape("build-job", [read]);
    expectShape("build-job", (await call("GET", "/v1/build-jobs", { token: admin })).body.jobs, ["run", "entries"]);
    expectShape("build-job", (await call("GET", `/v1/build-requests/${requestIds[0]}`, { token: admin })).body.jobs, ["run", "entries"]);

    const credit = await call("GET", "/v1/credits", { token: admin });
    expect(credit.body.entries.map((e: Json) => e.kind).sort()).toEqual(["grant", "reserve"]);
    expectShape("credit-entry", credit.body.entries);
    expectShape("credit-entry", read.entries);
    // A grant answers its entry as the ledger lists it, and the balance as GET /v1/credits shows it.
    const granted = await call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: 5 } });
    expect(granted.status).toBe(201);
    const { entry, ...balance } = granted.body;
    expectShape("credit-entry", [entry]);
    const after = (await call("GET", "/v1/credits", { token: admin })).body;
    expect(after.entries[0]).toEqual(entry);
    expect(balance).toEqual({ granted_cents: after.granted_cents, available_cents: after.available_cents, held_cents: after.held_cents, spent_cents: after.spent_cents });
    await createRequest(admin, projectId, "unused");
  });

  it("an autopilot project, as created, read, listed and changed", async () => {
    const { admin } = await createOrgWithSecret("docs-autopilot");
    const key = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n";
    const created = await call("POST", "/v1/autopilot/projects", {
      token: admin,
      body: { name: "docs", repository: "acme/docs", run: { launch: { command: ["agent"] } }, webhook_secret: "0123456789abcdef", github: { app_id: "1", installation_id: "2", private_key: key } },
    });
    expect(created.status).toBe(201);
    const changed = await call("PATCH", `/v1/autopilot/projects/${created.body.id}`, { token: admin, body: { queue_capacity: 2 } });
    const read = await call("GET", `/v1/autopilot/projects/${created.body.id}`, { token: admin });
    // A Linear-tracked project answers its tracker's settings too (docs/autopilot.md, "Linear").
    const linear = await call("POST", "/v1/autopilot/projects", {
      token: admin,
      body: {
        name: "docs linear",
        repository: "acme/docs",
        tracker: { kind: "linear", workspace: "acme", team: "ENG", review_state: "In Review", api_key: "lin_api_docs_0123456789" },
        run: { launch: { command: ["agent"] } },
        webhook_secret: "0123456789abcdef",
        github: { app_id: "1", installation_id: "2", private_key: key },
      },
    });
    expect(linear.status).toBe(201);
    const listed = await call("GET", "/v1/autopilot/projects", { token: admin });
    expectShape("autopilot-project", [created.body, changed.body, read.body, linear.body, ...listed.body.projects]);
    const scheduler = `/v1/autopilot/projects/${created.body.id}/scheduler`;
    const patched = await call("PATCH", scheduler, { token: admin, body: { window: { days: ["mon"], start: "09:00", end: "17:00", time_zone: "UTC" }, budget: { limit_cents: 100, per_run_cents: 10 } } });
    const disabled = await call("POST", `${scheduler}/disable`, { token: admin });
    expectShape("autopilot-scheduler", [(await call("GET", scheduler, { token: admin })).body, patched.body, disabled.body.scheduler]);
  });

  it("a run reservation, as listed and resolved", async () => {
    const runId = `run_${"a".repeat(24)}`;
    const { admin, projectId } = await reservationInCostReview("docs-reservations", runId, { grantCents: 1_000, reservedCents: 100 });
    const list = `/v1/autopilot/projects/${projectId}/reservations`;
    const held = (await call("GET", list, { token: admin })).body.reservations;
    const resolved = await call("POST", `${list}/${runId}/resolve`, { token: admin, body: { cost_cents: 50, note: "invoice" } });
    expect(resolved.status).toBe(200);
    expectShape("run-reservation", [...held, resolved.body, ...(await call("GET", list, { token: admin })).body.reservations]);
  });
});
