// Publication (docs/protocol.md, "Publication"): the runner's push credential, its pushed branch,
// Docket's PR step (taken by the alarm, never by a request), and its reconciliation before
// dispatch after an outage or a deploy.

import { admissionDeps } from "../../src/autopilot/wiring";
import type { PublicationProvider } from "../../src/autopilot/provider";
import { prStep } from "../../src/autopilot/publication-step";
import { isRefusal, refusal, type Refusal } from "../../src/errors";
import { logRun } from "../../src/lib/log";
import type { PushCredential } from "../../src/protocol/runners";
import { decide } from "../../src/run/decide";
import { awaitingPush, prStepDueAtMs, queuedPublication } from "../../src/run/publication";
import type { RunCommand, RunRecord } from "../../src/run/types";
import type { AttemptAnswer, RunCore } from "./core";
import { attemptCall } from "./leases";
import { finishPending } from "./pending";

/** What reconcilePublication found: the run's state and the publication step it waits for. */
export interface PublicationReconciled {
  state: string;
  publication: "pr_step" | "awaiting_push" | "push_job" | "none";
}

/**
 * The runner's push credential: only the machine holding a publishing attempt whose push is not
 * yet reported gets one (the call also renews its lease). Issued by the code host for this one
 * repository, answered once and never stored.
 */
export async function pushCredential(core: RunCore, orgId: string, attempt: number, machineId: string): Promise<PushCredential | Refusal> {
  const run = core.owned(orgId, true);
  if (isRefusal(run)) return run;
  const check = decide(run, { type: "lease", attempt, machineId }, Date.now(), core.config);
  if (!check.ok) return { error: check.error };
  if (!awaitingPush(run) || !run.publication) return refusal("invalid_transition", `run ${run.id} is ${run.state} and not awaiting a push`, { state: run.state });
  const host = await publisher(core, run);
  if (isRefusal(host)) return host;
  let issued: { token: string; expiresAtMs: number };
  try {
    issued = await host.host.issuePushToken(host.repository);
  } catch (err) {
    logRun("run.push_credential_failed", { run: run.id, attempt, reason: String(err) });
    return refusal("publication_unavailable", `the code host did not issue a push credential: ${err instanceof Error ? err.message : String(err)}`);
  }
  const leased = core.apply({ type: "lease", attempt, machineId });
  if ("error" in leased) return leased;
  return {
    run_id: run.id,
    attempt,
    token: issued.token,
    expires_at_ms: issued.expiresAtMs,
    push_url: run.repository?.url ?? `https://github.com/${host.repository}`,
    branch: run.publication.branch,
    source_revision: run.publication.sourceRevision,
    patch_digest: run.publication.patchDigest,
  };
}

/** The runner pushed the branch: recorded, then the alarm takes the PR step (never this request). */
export async function pushed(core: RunCore, orgId: string, command: Extract<RunCommand, { type: "pushed" }>): Promise<AttemptAnswer | Refusal> {
  const run = core.owned(orgId, true);
  if (isRefusal(run)) return run;
  return attemptCall(core, command);
}

/**
 * Recovery of a pending publication before dispatch (src/publication-recovery.ts): a publishing
 * run whose push never came and whose lease is gone pauses at its boundary; a pushed one, or a
 * queued continuation whose branch is pushed, goes on to the PR step. A run the recovery under
 * way (`recoveryEpochMs`) has already reconciled is left as it is.
 */
export async function reconcilePublication(core: RunCore, graceFromMs: number, recoveryEpochMs: number): Promise<PublicationReconciled> {
  const before = core.load();
  if (!before) return { state: "missing", publication: "none" };
  if (recoveryEpochMs > 0 && before.recoveredEpochMs === recoveryEpochMs) return { state: before.state, publication: "none" };
  if (before.state === "publishing") core.apply({ type: "deadline", recoveredAtMs: graceFromMs, jitter: Math.random() });
  await finishPending(core, { notify: true, graceFromMs });
  await advancePublication(core);
  const run = core.load()!;
  const what = prStepDueAtMs(run) !== null ? "pr_step" : awaitingPush(run) ? "awaiting_push" : queuedPublication(run) === "push" ? "push_job" : "none";
  return { state: run.state, publication: what };
}

/**
 * Moves a pending publication on: a queued continuation whose branch is pushed returns to
 * publishing (no coding turn), and a due PR step runs. One at a time in this instance.
 */
export async function advancePublication(core: RunCore): Promise<void> {
  if (core.publicationStep) return core.publicationStep;
  core.publicationStep = (async () => {
    if (queuedPublication(core.load()!) === "pushed") core.apply({ type: "publish" });
    const run = core.load()!;
    const due = prStepDueAtMs(run);
    if (due === null || due > Date.now()) return;
    const host = await publisher(core, run);
    const record = (command: Parameters<Parameters<typeof prStep>[4]>[0]) => !("error" in core.apply(command));
    if (isRefusal(host)) {
      record({ type: "publish_try", error: host.error.message, retryAtMs: Date.now() + core.config.publicationRetryMs });
    } else {
      await prStep(run, host.host, host.repository, core.config, record);
    }
    await finishPending(core, { notify: false });
  })().finally(() => (core.publicationStep = null));
  return core.publicationStep;
}

/** The project's code host, or a refusal saying why there is none. */
async function publisher(core: RunCore, run: RunRecord): Promise<{ host: PublicationProvider; repository: string } | Refusal> {
  const deps = admissionDeps(core.env);
  const projectId = run.metadata.autopilot_project;
  if (!deps.publisher || !projectId) return refusal("autopilot_not_configured", "no code host is configured for this run's publication");
  const project = await deps.readProject(core.env, projectId);
  if (!project) return refusal("autopilot_not_configured", `the run's autopilot project ${projectId} no longer exists`);
  return { host: deps.publisher(project, project.secrets, core.config, core.env), repository: project.repository };
}
