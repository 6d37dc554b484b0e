// The autopilot webhook's door (docs/protocol.md, "Autopilot admission"; docs/autopilot.md, "The
// GitHub App"): what an unsigned request can learn, what is decrypted before the signature is
// checked, the content types GitHub sends, and the ready label compared without case.
//
// Payloads are the real ones of @octokit/webhooks-examples, signed as GitHub signs them; the
// projects are created through the API and read by the D1 store; only the tracker stands in
// (test/workers/autopilot-fakes.ts).

import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { ticketOfDelivery } from "../../src/autopilot/webhook";
import { DEFAULTS } from "../../src/config";
import { AUTOPILOT_QUEUE, consumeAutopilot, type AutopilotMessage } from "../../src/autopilot/queue";
import { call, createOrg, sleep } from "./helpers";
import { briefBody, createProject, example, installRealAutopilotWithTracker, sign, WEBHOOK_SECRET, type RealProject } from "./autopilot-fakes";

const fake = installRealAutopilotWithTracker();
const UNKNOWN_PROJECT = "apj_000000000000000000000000";

let org: { orgId: string; admin: string };
let project: RealProject;
let nextNumber = 300;

beforeAll(async () => {
  org = await createOrg("webhook-door");
  project = await createProject(org.admin);
});

/** A real issues.labeled payload (the label "bug", the example project's ready label) about a fresh issue. */
function labeledPayload(number = nextNumber++) {
  const payload = example("issues", "labeled");
  payload.issue.number = number;
  payload.issue.body = briefBody(payload.issue.body);
  return payload;
}

/** A delivery as GitHub posts it: the raw answer, so two answers can be compared byte for byte. */
async function deliver(projectId: string, body: string, headers: Record<string, string>) {
  const res = await exports.default.fetch(
    new Request(`http://docket.test/v1/autopilot/projects/${projectId}/webhook`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-GitHub-Event": "issues", "X-GitHub-Delivery": crypto.randomUUID(), ...headers },
      body,
    }),
  );
  return { status: res.status, contentType: res.headers.get("content-type"), text: await res.text() };
}

async function ticketOf(p: RealProject, number: number, admin = org.admin) {
  const res = await call("GET", `/v1/autopilot/projects/${p.id}/tickets`, { token: admin });
  expect(res.status).toBe(200);
  return (res.body.tickets as Record<string, any>[]).find((t) => t.number === number);
}

/** The ticket once the AUTOPILOT queue's consumer has decided it: past `admitting` (or as it is after ~5 s). */
async function decided(p: RealProject, number: number, admin = org.admin) {
  let ticket;
  for (let i = 0; i < 100 && (!ticket?.status || ticket.status === "admitting"); i++) {
    await sleep(50);
    ticket = await ticketOf(p, number, admin);
  }
  return ticket;
}

describe("an unsigned request learns nothing", () => {
  it("an unknown project and a bad signature get byte-identical answers, and nothing is admitted", async () => {
    const payload = labeledPayload();
    fake.tracker(project.id).fromPayload(payload);
    const body = JSON.stringify(payload);
    const wrong = await sign("not-the-project-secret-0123456789", body);
    const unknown = await deliver(UNKNOWN_PROJECT, body, { "X-Hub-Signature-256": wrong, "X-GitHub-Delivery": "same-delivery" });
    const badSignature = await deliver(project.id, body, { "X-Hub-Signature-256": wrong, "X-GitHub-Delivery": "same-delivery" });
    const unsigned = await deliver(project.id, body, { "X-GitHub-Delivery": "same-delivery" });
    const unknownUnsigned = await deliver(UNKNOWN_PROJECT, body, { "X-GitHub-Delivery": "same-delivery" });
    expect(unknown.status).toBe(401);
    expect(JSON.parse(unknown.text).error.code).toBe("unauthorized");
    for (const other of [badSignature, unsigned, unknownUnsigned]) expect(other).toEqual(unknown);

    // Nothing reached admission: no ticket, no run.
    await sleep(1_000);
    expect(await ticketOf(project, payload.issue.number)).toBeUndefined();
    expect((await call("GET", "/v1/runs", { token: org.admin })).body.runs).toEqual([]);
  });

  it("only the webhook secret is decrypted before the signature: a project whose App key does not decrypt still verifies its deliveries", async () => {
    // Another organization's project on the same repository (one organization watches a repository once).
    const sealed = await createProject((await createOrg("sealed-key")).admin);
    // The App's private key as a changed AUTOPILOT_SECRET_KEY or a tampered row leaves it: undecryptable.
    await env.DB.prepare("UPDATE autopilot_projects SET private_key_enc = 'v1.AAAA.AAAA' WHERE id = ?").bind(sealed.id).run();
    const body = JSON.stringify(labeledPayload());
    const unsigned = await deliver(sealed.id, body, { "X-Hub-Signature-256": await sign("not-the-project-secret-0123456789", body) });
    const unknown = await deliver(UNKNOWN_PROJECT, body, { "X-Hub-Signature-256": await sign("not-the-project-secret-0123456789", body) });
    expect(unsigned.status).toBe(401);
    expect(unsigned.text).toBe(unknown.text);
    const signed = await deliver(sealed.id, body, { "X-Hub-Signature-256": await sign(WEBHOOK_SECRET, body) });
    expect(signed.status).toBe(202);
    expect(JSON.parse(signed.text)).toMatchObject({ queued: true });
  });
});

describe("GitHub's content types", () => {
  it("a signed application/x-www-form-urlencoded delivery (GitHub's default) is read from its payload field and admits", async () => {
    const payload = labeledPayload();
    fake.tracker(project.id).fromPayload(payload);
    // As GitHub sends it: the JSON URL-encoded in the field `payload`, the signature over that raw form body.
    const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
    const res = await deliver(project.id, body, { "Content-Type": "application/x-www-form-urlencoded", "X-Hub-Signature-256": await sign(WEBHOOK_SECRET, body) });
    expect(res.status).toBe(202);
    expect(JSON.parse(res.text)).toMatchObject({ event: "issues", queued: true, ignored_reason: null });
    expect(await decided(project, payload.issue.number)).toMatchObject({ status: "admitted", reasons: [] });
  });

  it("a form delivery signed over its JSON instead of its raw body is 401; one without a payload field is 400 naming it", async () => {
    const json = JSON.stringify(labeledPayload());
    const body = new URLSearchParams({ payload: json }).toString();
    const form = { "Content-Type": "application/x-www-form-urlencoded" };
    expect((await deliver(project.id, body, { ...form, "X-Hub-Signature-256": await sign(WEBHOOK_SECRET, json) })).status).toBe(401);
    const empty = "other=1";
    const res = await deliver(project.id, empty, { ...form, "X-Hub-Signature-256": await sign(WEBHOOK_SECRET, empty) });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).error).toMatchObject({ code: "invalid_request", field: "payload" });
  });
});

describe("the ready label compares without case", () => {
  it("a webhook adding \"Ready\" when the project's ready label is \"ready\" admits", async () => {
    // Trusted-actor assumption on and GitHub's timeline not showing the addition yet: the
    // delivery's own labeled event is the only evidence, so it must be seen as the ready label's.
    const other = await createOrg("ready-label");
    const ready = await createProject(other.admin, { ready_label: "ready", trusted_actor_assumption: true });
    const payload = labeledPayload();
    payload.label = { ...payload.label, name: "Ready" };
    payload.issue.labels = [{ ...payload.issue.labels[0], name: "Ready" }];
    fake.tracker(ready.id).fromPayload(payload).transition = null;

    const body = JSON.stringify(payload);
    const res = await deliver(ready.id, body, { "X-Hub-Signature-256": await sign(WEBHOOK_SECRET, body) });
    expect(res.status).toBe(202);
    const ticket = await decided(ready, payload.issue.number, other.admin);
    expect(ticket).toMatchObject({ status: "admitted", reasons: [] });
    const run = await call("GET", `/v1/runs/${ticket!.run_id}`, { token: other.admin });
    expect(run.body).toMatchObject({ state: "queued", project_id: ready.id });
    expect(ticketOfDelivery("issues", payload, "ready", DEFAULTS.autopilotWebhookFactsMaxBytes)?.sender).toMatchObject({ login: payload.sender.login });
  });
});

describe("one project's slow GitHub does not hold another's deliveries", () => {
  it("the deliveries of a batch are admitted side by side: one whose GitHub does not answer is retried without delaying the next project's admission", async () => {
    const stuck = await createProject(org.admin, { repository: "acme/stuck" });
    const payload = labeledPayload();
    fake.tracker(project.id).fromPayload(payload);
    const settled: string[] = [];
    // The stuck project's GitHub answers only once the other delivery was acknowledged (or after 5 s).
    vi.spyOn(fake.tracker(stuck.id), "getIssue").mockImplementation(async () => {
      for (let waited = 0; waited < 5_000 && settled.length === 0; waited += 20) await sleep(20);
      throw new Error("could not reach GitHub (a fake outage)");
    });
    const message = (projectId: string, number: number) =>
      ({
        id: crypto.randomUUID(),
        timestamp: new Date(),
        attempts: 1,
        body: { kind: "autopilot.delivery", project_id: projectId, number, delivery_id: crypto.randomUUID(), event: "issues", action: "labeled", sender: { login: payload.sender.login, type: payload.sender.type, viaApp: null } } satisfies AutopilotMessage,
        ack: () => settled.push(`ack ${projectId}`),
        retry: () => settled.push(`retry ${projectId}`),
      }) as unknown as Message<unknown>;
    const batch = { queue: AUTOPILOT_QUEUE, messages: [message(stuck.id, 1), message(project.id, payload.issue.number)], ackAll: () => {}, retryAll: () => {} };
    await consumeAutopilot(batch as unknown as MessageBatch<unknown>, env);
    expect(settled).toEqual([`ack ${project.id}`, `retry ${stuck.id}`]);
    expect((await decided(project, payload.issue.number))?.status).toBe("admitted");
  });
});
