// A claim: attempt N+1 of a queued run handed to a machine (docs/protocol.md, "Runner protocol"), its
// run-attempt token stored by hash, its queue row and events recorded in the claim's own commit.
// An autopilot run first asks the ticket that admitted it whether it still backs the run.

import { ticketStub } from "../../src/autopilot/admission";
import { refusal, type Refusal } from "../../src/errors";
import { addCost, noCost, type Cost } from "../../src/lib/cost";
import { newToken, sha256Hex } from "../../src/lib/crypto";
import { logRun } from "../../src/lib/log";
import type { ClaimGrant } from "../../src/protocol/runners";
import type { RunRecord } from "../../src/run/types";
import type { Sending } from "../outbox";
import { attemptTokens, runTable } from "../run-schema";
import type { BackingAnswer } from "../ticket-object";
import { grantCheckpoint } from "./checkpoint";
import type { RunCore } from "./core";
import { finishClaim, finishPending } from "./pending";

/**
 * claim(), with the D1 rows it read and wrote and the Durable Object requests it made.
 * `attempt`: the attempt the scheduler took the run's slot for; another is refused (its queue row was stale).
 */
export async function claimCounted(core: RunCore, machineId: string, attempt: number | null): Promise<{ answer: ClaimGrant | Refusal; cost: Cost }> {
  const cost = noCost();
  const held = await ticketHold(core, machineId, cost);
  if (held) return { answer: held, cost };
  const token = newToken("attempt");
  const tokenHash = await sha256Hex(token);
  // The claim's side effects are finished just below, so its alarm is its launch deadline; they
  // are recorded as done in the claim's own commit, and undone if they fail (finishClaim).
  let sending: Sending | null = null;
  const projectedBefore = core.projectedVersion();
  const result = otherAttempt(core, attempt) ?? core.apply(
    { type: "claim", machineId },
    {
      finishedHere: true,
      alsoWrite: (run) => {
        core.db.insert(attemptTokens).values({ attempt: run.attempt, machine_id: machineId, token_hash: tokenHash }).run();
        core.db.update(runTable).set({ projected_version: run.version }).run();
        sending = core.outbox.markSending(run, Date.now());
      },
    },
  );
  if ("error" in result) {
    // A claim that found a stale queue row: the row is repaired and whatever else a crash left
    // pending is finished (the alarm too) before the refusal goes back. No wake-up: the row
    // would only be found again.
    const stale = core.load();
    if (stale) {
      logRun("run.claim_refused", { run: stale.id, attempt: stale.attempt, machine: machineId, code: result.error.code, reason: result.error.message });
      addCost(cost, await finishPending(core, { forceProjection: true, notify: false }));
    }
    return { answer: result, cost };
  }
  addCost(cost, await finishClaim(core, result.run, projectedBefore, sending, result.alarmAtMs));
  return { answer: grant(core, result.run, token), cost };
}

/** The grant a claimed attempt's machine gets: its token, its lease and what to run. */
function grant(core: RunCore, run: RunRecord, token: string): ClaimGrant {
  return {
    run_id: run.id,
    attempt: run.attempt,
    attempt_token: token,
    lease_expires_at_ms: run.leaseExpiresAtMs!,
    lease_ttl_ms: core.config.leaseTtlMs,
    lease_refresh_ms: core.config.leaseRefreshMs,
    launch_deadline_at_ms: run.launchDeadlineAtMs ?? run.leaseExpiresAtMs!,
    sandbox_lifetime_ms: core.config.sandboxLifetimeMs,
    brief: run.brief,
    repository: run.repository,
    launch: run.launch,
    ...pushOnlyJob(core, run),
    checkpoint: grantCheckpoint(core, run),
  };
}

/** A queued run whose next attempt is not the one the scheduler's slot was taken for refuses the claim. */
function otherAttempt(core: RunCore, attempt: number | null): Refusal | null {
  const run = core.load();
  if (attempt === null || !run || run.state !== "queued" || run.attempt + 1 === attempt) return null;
  return refusal("stale_attempt", `the claim was for attempt ${attempt}; the run's next attempt is ${run.attempt + 1}`, { current_attempt: run.attempt });
}

/** A push-only job's grant: what to apply and push, so a publication continuation runs no agent. */
function pushOnlyJob(core: RunCore, run: RunRecord): Pick<ClaimGrant, "publication"> {
  if (run.state !== "publishing" || !run.publication) return {};
  const patch = core.artifacts.restore(run).artifact?.patch ?? "";
  return { publication: { branch: run.publication.branch, source_revision: run.publication.sourceRevision, patch } };
}

/**
 * The pre-claim recheck of an autopilot run (../shared/spec/run-lifecycle.md, "Queue and
 * dispatch": a queued run whose eligibility lapsed never starts): one request to the ticket that
 * admitted it, which answers from what it recorded, never from the tracker. Not backed: the run is
 * cancelled with the ticket's reason and the claim refused. Ticket unreachable: refused for now,
 * never handed out on a guess. Other runs (no ticket) pay nothing. Null lets the claim go on.
 */
async function ticketHold(core: RunCore, machineId: string, cost: Cost): Promise<Refusal | null> {
  const run = core.load();
  if (!run || run.state !== "queued" || !run.ticketKey) return null;
  cost.doRequests += 1;
  let verdict: BackingAnswer;
  // Runs stored before projectId existed name their project in their metadata (autopilot/admission.ts, runFor).
  const at = { projectId: run.projectId ?? run.metadata.autopilot_project ?? "", ticketKey: run.ticketKey };
  try {
    verdict = await ticketStub(core.env, at).backs(run.id, at);
  } catch (err) {
    logRun("run.claim_refused", { run: run.id, attempt: run.attempt, machine: machineId, code: "ticket_unreachable", reason: `the ticket ${run.ticketKey} could not be asked: ${String(err)}` });
    return refusal("internal", "the run's autopilot ticket could not be asked whether it still backs the run; the claim is refused for now");
  }
  if (verdict.backs === true) return null;
  if (verdict.backs === "unknown") {
    logRun("run.claim_refused", { run: run.id, attempt: run.attempt, machine: machineId, code: "ticket_unsettled", reason: verdict.reason });
    return refusal("internal", `the run's autopilot ticket cannot tell yet whether it backs the run (${verdict.reason}); the claim is refused for now`);
  }
  // Only a run still queued is withdrawn; one that moved on meanwhile is the claim's to refuse.
  if (core.load()?.state !== "queued") return null;
  const result = core.apply({ type: "cancel", by: "autopilot", reason: verdict.reason });
  if ("error" in result) return result;
  addCost(cost, await finishPending(core, { notify: false }));
  logRun("run.claim_refused", { run: run.id, attempt: run.attempt, machine: machineId, code: "ticket_withdrawn", reason: verdict.reason });
  return refusal("invalid_transition", `the run's autopilot ticket no longer backs it (${verdict.reason}); it was cancelled`);
}
