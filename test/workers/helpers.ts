// Test helpers that speak to Docket through its public HTTP surface, as a user or a runner would.

import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import type { Config } from "../../src/config";
import type { RunRecord } from "../../src/run/types";

export const ADMIN_SECRET = "test-admin-secret";
export const CLI_VERSION = "0.1.0";

type Json = Record<string, any>;

export async function call(
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Json; headers: Headers }> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await exports.default.fetch(new Request(`http://docket.test${path}`, { method, headers, body }));
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {}, headers: res.headers };
}

export async function createOrg(name = "acme") {
  const res = await call("POST", "/v1/orgs", { token: ADMIN_SECRET, body: { name } });
  if (res.status !== 201) throw new Error(`create org: ${res.status} ${JSON.stringify(res.body)}`);
  return { orgId: res.body.org.id as string, admin: res.body.token.token as string };
}

export async function registerRunner(admin: string, opts: { name?: string; labels?: string[]; protocols?: string[] } = {}) {
  const reg = await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } });
  const res = await call("POST", "/v1/runners/register", {
    token: reg.body.token,
    body: { name: opts.name ?? "box", labels: opts.labels ?? [], protocols: opts.protocols ?? ["process"], cli_version: CLI_VERSION },
  });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${JSON.stringify(res.body)}`);
  return { machineId: res.body.machine_id as string, token: res.body.machine_token as string };
}

export function runBody(overrides: Json = {}) {
  return { brief: "fix the bug", launch: { command: ["node", "agent.mjs"] }, ...overrides };
}

export async function dispatch(member: string, overrides: Json = {}, key?: string) {
  const res = await call("POST", "/v1/runs", { token: member, body: runBody(overrides), headers: key ? { "Idempotency-Key": key } : {} });
  if (res.status !== 201) throw new Error(`dispatch: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

export async function claim(machineToken: string, waitMs = 0) {
  return call("POST", "/v1/runners/claim", { token: machineToken, body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: waitMs } });
}

export function attemptCall(machineToken: string, runId: string, attempt: number, what: string, body: unknown = {}) {
  return call("POST", `/v1/runs/${runId}/attempts/${attempt}/${what}`, { token: machineToken, body });
}

export function report(attemptToken: string, runId: string, body: unknown) {
  return call("POST", `/v1/runs/${runId}/reports`, { token: attemptToken, body });
}

export async function getRun(member: string, runId: string) {
  const res = await call("GET", `/v1/runs/${runId}`, { token: member });
  if (res.status !== 200) throw new Error(`get run: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export function runStub(runId: string) {
  return env.RUN.get(env.RUN.idFromName(runId));
}

/** The organization's scheduler object. */
export function schedulerOf(orgId: string) {
  return env.SCHEDULER.get(env.SCHEDULER.idFromName(orgId));
}

/** Changes the organization's scheduler's settings from now on, as those variables set otherwise would (its instance keeps them until it is evicted). */
export async function setSchedulerConfig(orgId: string, change: Partial<Config>): Promise<void> {
  // runInDurableObject checks each Durable Object binding of env: a file's stand-in for the
  // containers' binding (managed-fakes.ts) gives way to the binding itself meanwhile.
  const bindings = env as unknown as Record<string, unknown>;
  const had = "MANAGED_RUNNER" in bindings;
  const inPlace = bindings.MANAGED_RUNNER;
  bindings.MANAGED_RUNNER = MANAGED_RUNNER_BINDING;
  try {
    await runInDurableObject(schedulerOf(orgId) as unknown as DurableObjectStub, (instance: unknown) => {
      const holder = instance as { config: Config };
      holder.config = { ...holder.config, ...change };
    });
  } finally {
    if (had) bindings.MANAGED_RUNNER = inPlace;
    else delete bindings.MANAGED_RUNNER;
  }
}

/** The containers' Durable Object binding as the pool gives it, before a file puts a stand-in in its place. */
const MANAGED_RUNNER_BINDING = (env as unknown as Record<string, unknown>).MANAGED_RUNNER;

/** Waits until the organization's scheduler holds a waiting claim (one started and not awaited). */
export async function untilClaimWaits(orgId: string): Promise<void> {
  const scheduler = schedulerOf(orgId);
  while ((await scheduler.readStats()).waiters === 0) await sleep(10);
}

/** An organization, a runner and a run it claimed and launched as attempt 1 (sandbox `sbx-1`). */
export async function launchedRun() {
  const { admin } = await createOrg();
  const runner = await registerRunner(admin);
  const runId = await dispatch(admin);
  const grant = (await claim(runner.token, 0)).body;
  if (grant?.run_id !== runId) throw new Error(`launchedRun: the claim granted ${JSON.stringify(grant)}, not ${runId}`);
  await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
  return { admin, runner, runId, grant, attemptToken: grant.attempt_token as string };
}

/**
 * Changes the stored run behind the object's back (as if time had passed), and drops the copy the
 * object keeps in memory (RunCore.load, durable-objects/run/core.ts), so its next call reads the change. Answers what `edit` answers.
 */
export async function editStoredRun<T>(runId: string, edit: (run: RunRecord) => T): Promise<T> {
  return runInDurableObject(runStub(runId), (instance, state) => {
    const run = JSON.parse(state.storage.sql.exec<{ doc: string }>("SELECT doc FROM run").one().doc) as RunRecord;
    const answer = edit(run);
    state.storage.sql.exec("UPDATE run SET doc = ?", JSON.stringify(run));
    (instance as unknown as { core: { stored: RunRecord | null | undefined } }).core.stored = undefined;
    return answer;
  });
}

/**
 * Moves a run `ms` into the past, as if that much time had gone by for it: every deadline and
 * timestamp it keeps, and its queue row's, shifts back. Run its alarm next to act at that later time.
 */
export async function ageRun(runId: string, ms: number): Promise<void> {
  await editStoredRun(runId, (run) => {
    const shift = (v: number | null) => (v === null ? null : v - ms);
    run.leaseExpiresAtMs = shift(run.leaseExpiresAtMs);
    run.launchDeadlineAtMs = shift(run.launchDeadlineAtMs);
    run.lastReportAtMs = shift(run.lastReportAtMs);
    run.launchedAtMs = shift(run.launchedAtMs);
    run.claimedAtMs = shift(run.claimedAtMs);
    run.notBeforeMs = run.notBeforeMs - ms;
    run.queuedAtMs = run.queuedAtMs - ms;
  });
  await env.DB.prepare("UPDATE runs SET not_before_ms = not_before_ms - ?1, queued_at_ms = queued_at_ms - ?1 WHERE id = ?2")
    .bind(ms, runId)
    .run();
}

export async function runAlarm(runId: string): Promise<boolean> {
  return runDurableObjectAlarm(runStub(runId));
}

/** Lets background work (queue deliveries) settle. */
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The Docket-Cost header of an answer (src/lib/cost.ts) as numbers by name. */
export function parseCost(header: string | null): Record<string, number> {
  if (header === null) throw new Error("the answer has no Docket-Cost header");
  return Object.fromEntries(header.split(",").map((part) => part.trim().split("=")).map(([k, v]) => [k, Number(v)]));
}
