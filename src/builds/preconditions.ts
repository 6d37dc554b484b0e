// What a build dispatch needs before any credit is reserved, each refusal with its own code
// (../shared/spec/build-lifecycle.md, "From request to reserved job").

import { and, eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { buildJobs } from "../db/ledger-schema";
import type { Env } from "../env";
import { DocketError } from "../errors";
import { readBalance } from "../ledger/ledger";
import type { LaunchSpec } from "../run/types";
import type { ProjectRow, RequestRow } from "./payload";
import { OPEN_JOB_STATUSES, REVIEW_JOB_STATUSES } from "./states";
import { hasConnectedRunner } from "./store";

/**
 * The preconditions, each with its own code (build-lifecycle.md, "From request to reserved job":
 * a saved plan, an accepted license, a connected runner and at least the minimum available).
 */
export async function checkPreconditions(env: Env, config: Config, project: ProjectRow, request: RequestRow, nowMs: number): Promise<void> {
  if (request.planSavedAtMs === null) {
    throw new DocketError("plan_required", "save the source plan first: PUT /v1/build-requests/:id/plan", { request_id: request.id });
  }
  if (project.licenseAcceptedAtMs === null) {
    throw new DocketError("license_required", "accept the project's license first: POST /v1/projects/:id/license", { project_id: project.id });
  }
  const held = await findHeldJob(env, request);
  if (held) refuseHeld(request, held);
  const launch = JSON.parse(project.launch) as LaunchSpec;
  const labels = JSON.parse(project.labels) as string[];
  if (!(await hasConnectedRunner(env.DB, request.orgId, { protocol: launch.protocol, labels }, config.runnerConnectedWindowMs, nowMs))) {
    const needs = [`protocol ${launch.protocol}`, ...labels.map((l) => `label ${l}`)].join(", ");
    throw new DocketError("no_connected_runner", `no runner that can serve this project (${needs}) was heard from within ${config.runnerConnectedWindowMs} ms`, {
      window_ms: config.runnerConnectedWindowMs,
    });
  }
  const balance = await readBalance(env.DB, request.orgId);
  if (balance.available_cents < config.buildMinAvailableCents) refuseCredit(config, balance.available_cents);
}

export function refuseHeld(request: RequestRow, held: { id: string; status: string }): never {
  if (REVIEW_JOB_STATUSES.includes(held.status as never)) {
    // "Reconcile unknown costs before releasing credit or creating a new paid job" (build-lifecycle.md, "Recover without duplicating spend").
    throw new DocketError("cost_review_pending", `job ${held.id} of this request is held for ${held.status}; resolve it before a new paid job`, {
      request_id: request.id,
      job_id: held.id,
      status: held.status,
    });
  }
  throw new DocketError("job_already_queued", `this request already has a queued job (${held.id})`, { request_id: request.id, job_id: held.id, status: held.status });
}

export function refuseCredit(config: Config, availableCents: number): never {
  throw new DocketError("insufficient_credit", `a build needs at least ${config.buildMinAvailableCents} cents of available credit`, {
    available_cents: availableCents,
    min_available_cents: config.buildMinAvailableCents,
  });
}

/** The request's job that holds a reservation or waits for review, if any. */
export async function findHeldJob(env: Env, request: RequestRow): Promise<{ id: string; status: string } | undefined> {
  return drizzle(env.DB)
    .select({ id: buildJobs.id, status: buildJobs.status })
    .from(buildJobs)
    .where(and(eq(buildJobs.orgId, request.orgId), eq(buildJobs.requestId, request.id), inArray(buildJobs.status, [...OPEN_JOB_STATUSES, ...REVIEW_JOB_STATUSES])))
    .get();
}

/** After the reservation statement refused (atomically), says why: a held job, or too little credit. */
export async function explainRefusal(env: Env, config: Config, request: RequestRow): Promise<never> {
  const held = await findHeldJob(env, request);
  if (held) refuseHeld(request, held);
  refuseCredit(config, (await readBalance(env.DB, request.orgId)).available_cents);
}
