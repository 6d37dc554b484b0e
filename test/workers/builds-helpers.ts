// Helpers for the build and ledger tests: a new user's path through the HTTP API (project,
// license, request, plan, credit, runner), and the ledger identity checked after every test.

import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, beforeEach, expect, vi } from "vitest";
import { reserveRunBudget } from "../../src/autopilot/run-budget";
import type { OutboxMessage } from "../../src/env";
import worker from "../../src/index";
import { createProject as createAutopilotProject } from "./autopilot-fakes";
import { attemptCall, call, claim, createOrg, registerRunner, report } from "./helpers";

type Json = Record<string, any>;

export const COMMIT = "4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c";
export const SOURCE_URL = "https://github.com/acme/contracts";

/** Admin tokens of every organization a test created; each is audited when the test ends. */
const audited: string[] = [];

/**
 * Before every test: completion callbacks to the test host reach this Worker (tests are offline),
 * so a job's exact callback URL is really called back. After every test: available + held + spent
 * = granted, and every job's money matches its entries.
 */
export function auditLedgerAfterEachTest(): void {
  beforeEach(() => {
    const realFetch = globalThis.fetch;
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init);
      return new URL(request.url).hostname === "docket.test" ? exports.default.fetch(request) : realFetch(request);
    });
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    const tokens = audited.splice(0);
    for (const token of tokens) await expectLedgerIdentity(token);
  });
}

export async function expectLedgerIdentity(token: string): Promise<Json> {
  const credits = await call("GET", "/v1/credits", { token });
  expect(credits.status).toBe(200);
  const { granted_cents, available_cents, held_cents, spent_cents } = credits.body;
  expect(available_cents + held_cents + spent_cents).toBe(granted_cents);
  expect(Math.min(available_cents, held_cents, spent_cents)).toBeGreaterThanOrEqual(0);
  const audit = await call("GET", "/v1/credits/audit", { token });
  expect(audit.status).toBe(200);
  expect(audit.body.problems).toEqual([]);
  expect(audit.body.ok).toBe(true);
  return credits.body;
}

export async function newOrg(name = "acme") {
  const org = await createOrg(name);
  audited.push(org.admin);
  return org;
}

export async function grantCredit(admin: string, amountCents: number, key?: string) {
  const res = await call("POST", "/v1/credits/grants", {
    token: admin,
    body: { amount_cents: amountCents, note: "test credit" },
    headers: key ? { "Idempotency-Key": key } : {},
  });
  if (res.status !== 201 && res.status !== 200) throw new Error(`grant: ${res.status} ${JSON.stringify(res.body)}`);
  return res;
}

export async function credits(token: string) {
  const res = await call("GET", "/v1/credits", { token });
  expect(res.status).toBe(200);
  return res.body;
}

export async function createProject(token: string, overrides: Json = {}) {
  const res = await call("POST", "/v1/projects", {
    token,
    body: { name: "contracts", source_url: SOURCE_URL, launch: { command: ["node", "agent.mjs"] }, ...overrides },
  });
  if (res.status !== 201) throw new Error(`project: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

export async function acceptLicense(token: string, projectId: string) {
  const res = await call("POST", `/v1/projects/${projectId}/license`, { token, body: { license: "MIT", accepted: true } });
  if (res.status !== 200) throw new Error(`license: ${res.status} ${JSON.stringify(res.body)}`);
}

export async function createRequest(token: string, projectId: string, title = "migrate the vault") {
  const res = await call("POST", `/v1/projects/${projectId}/requests`, { token, body: { title } });
  if (res.status !== 201) throw new Error(`request: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

export function plan(overrides: Json = {}) {
  return { pinned_commit: COMMIT, migration_plan: "Move Vault to the v2 storage layout", chain_target: "base-sepolia", ...overrides };
}

export async function savePlan(token: string, requestId: string, overrides: Json = {}) {
  const res = await call("PUT", `/v1/build-requests/${requestId}/plan`, { token, body: plan(overrides) });
  if (res.status !== 200) throw new Error(`plan: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** An organization with credit, a connected runner, a licensed project and `requests` planned requests. */
export async function readyToBuild(opts: { creditCents?: number; requests?: number; runner?: boolean; name?: string } = {}) {
  const { admin, orgId } = await newOrg(opts.name);
  if ((opts.creditCents ?? 10_000) > 0) await grantCredit(admin, opts.creditCents ?? 10_000);
  const runner = opts.runner === false ? null : await registerRunner(admin);
  const projectId = await createProject(admin);
  await acceptLicense(admin, projectId);
  const requestIds: string[] = [];
  for (let i = 0; i < (opts.requests ?? 1); i++) {
    const id = await createRequest(admin, projectId, `request ${i + 1}`);
    await savePlan(admin, id);
    requestIds.push(id);
  }
  return { admin, orgId, runner, projectId, requestId: requestIds[0], requestIds };
}

export function dispatchBuild(token: string, requestId: string, jobId?: string, body?: unknown) {
  return call("POST", `/v1/build-requests/${requestId}/dispatch`, {
    token,
    body: body ?? {},
    headers: jobId ? { "Idempotency-Key": jobId } : {},
  });
}

export async function getJob(token: string, jobId: string) {
  const res = await call("GET", `/v1/build-jobs/${jobId}`, { token });
  if (res.status !== 200) throw new Error(`job: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function getRequest(token: string, requestId: string) {
  const res = await call("GET", `/v1/build-requests/${requestId}`, { token });
  if (res.status !== 200) throw new Error(`request: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The runner claims the job's run, launches it, and the daemon sends `final`. */
export async function runToEnd(machineToken: string, runId: string, final: Json | null, opts: { launch?: boolean } = {}) {
  const claimed = await claim(machineToken, 0);
  expect(claimed.status).toBe(200);
  expect(claimed.body.run_id).toBe(runId);
  if (opts.launch !== false) {
    expect((await attemptCall(machineToken, runId, claimed.body.attempt, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
  }
  if (final) expect((await report(claimed.body.attempt_token, runId, { final })).status).toBe(200);
  return claimed.body;
}

export function finalReport(costCents: number | null, overrides: Json = {}) {
  return {
    outcome: "completed",
    exit_codes: { agent: 0, tests: 0 },
    artifact: { patch: "diff --git a/Vault.sol b/Vault.sol\n+// v2 layout\n", source_revision: COMMIT, model: "model-x", limitations: ["no mainnet dry run"] },
    cost_cents: costCents,
    ...overrides,
  };
}

/** Waits until the job's run has ended and the outbox consumer has acted on it (no timing is asserted). */
export async function waitForJob(token: string, jobId: string, done: (job: Json) => boolean) {
  return vi.waitFor(
    async () => {
      const job = await getJob(token, jobId);
      if (!done(job)) throw new Error(`job ${jobId} is still ${job.status}`);
      return job;
    },
    { timeout: 20_000, interval: 50 },
  );
}

let nextMessage = 0;

/** Delivers outbox events straight to the Worker's queue handler, as the Queue would (again, or out of order). */
export async function deliverEvents(events: OutboxMessage[]) {
  const batch = createMessageBatch(
    "docket-events",
    events.map((body) => ({ id: `build-msg-${++nextMessage}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await worker.queue(batch as MessageBatch<OutboxMessage>, env);
  return getQueueResult(batch, ctx);
}

/** The run's stored events (as the consumer would receive them again). */
export async function runEvents(token: string, runId: string, orgId: string): Promise<OutboxMessage[]> {
  const res = await call("GET", `/v1/runs/${runId}/events?limit=1000`, { token });
  expect(res.status).toBe(200);
  return res.body.events.map((e: Json) => ({ run_id: runId, org_id: orgId, seq: e.seq, type: e.type, at_ms: e.at_ms, data: e.data }));
}

/** Moves a job's last dispatch attempt `ms` into the past, as if that much time had gone by. */
export async function ageDispatch(orgId: string, jobId: string, ms: number) {
  await env.DB.prepare("UPDATE build_jobs SET dispatch_attempted_at_ms = dispatch_attempted_at_ms - ? WHERE org_id = ? AND id = ?").bind(ms, orgId, jobId).run();
}

/** Moves every runner of the organization `ms` into the past (last heard from). */
export async function ageRunners(orgId: string, ms: number) {
  await env.DB.prepare("UPDATE machines SET last_seen_at_ms = last_seen_at_ms - ? WHERE org_id = ?").bind(ms, orgId).run();
}

export async function runCount(token: string): Promise<number> {
  const res = await call("GET", "/v1/runs?limit=200", { token });
  expect(res.status).toBe(200);
  return res.body.runs.length;
}

/**
 * An autopilot run's model-spend reservation in cost review, in a new organization with `grantCents`
 * of credit: reserved as the scheduler reserves it, then moved to cost review as the outbox moves
 * a run that reported more than it reserved (the whole path is test/workers/run-reservations.test.ts).
 */
export async function reservationInCostReview(name: string, runId: string, opts: { grantCents: number; reservedCents: number }) {
  const org = await createOrg(name);
  const project = await createAutopilotProject(org.admin);
  expect((await call("POST", "/v1/credits/grants", { token: org.admin, body: { amount_cents: opts.grantCents } })).status).toBe(201);
  expect(await reserveRunBudget(env, { orgId: org.orgId, runId, projectId: project.id, cents: opts.reservedCents })).toBe("reserved");
  await env.DB.prepare("UPDATE run_reservations SET status = 'cost_review' WHERE run_id = ?").bind(runId).run();
  return { ...org, projectId: project.id };
}

/** A build job (id `jobId`) whose run completed reporting `costCents`, waiting for cost review when that is above its reservation. */
export async function jobInCostReview(jobId: string, costCents: number) {
  const { admin, requestId, runner } = await readyToBuild({ creditCents: 10_000 });
  const job = (await dispatchBuild(admin, requestId, jobId)).body;
  await runToEnd(runner!.token, job.run_id, finalReport(costCents));
  await waitForJob(admin, job.id, (j) => j.status === "cost_review");
  return { admin, job };
}
