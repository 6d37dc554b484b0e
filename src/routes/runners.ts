// The runner protocol: register, heartbeat, claim, the attempt calls and daemon reports
// (../shared/spec/dispatch-lifecycle.md; docs/protocol.md, "Runner protocol").

import { and, eq, isNull, ne } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../app-types";
import { bearer } from "../auth";
import { atMost, checkLabels, checkReport } from "../bounds";
import { runnerConfig, type Config } from "../config";
import { versionAtLeast } from "../protocol/version";
import { deregisterMachine, machineView } from "../credentials/machines";
import { returnRegistrationUse, takeRegistrationUse } from "../credentials/tokens";
import { machines, tokens } from "../db/schema";
import { DocketError, refusalError, unwrap } from "../errors";
import { addCost, addD1, COST_HEADER, formatCost } from "../lib/cost";
import { newId, newToken, sha256Hex } from "../lib/crypto";
import { log } from "../lib/log";
import { listPage, pageSize } from "../lib/pagination";
import { d1Session } from "../lib/read-session";
import { claimKick } from "../recovery";
import { bookmarkHeader } from "../openapi/headers";
import { blockerFromWire } from "../run/blocker";
import { normalizeLabels } from "../run/labels";
import { validate } from "../validate";
import { operation, type OperationSpec } from "../openapi/operation";
import {
  AttemptAnswer,
  AttemptPath,
  CancelClaimBody,
  CheckpointBody,
  CheckpointUnusableBody,
  ClaimBody,
  ClaimCancelled,
  ClaimGrant,
  HeartbeatAnswer,
  HeartbeatBody,
  LaunchedBody,
  LaunchFailedBody,
  LeaseBody,
  ListRunnersQuery,
  PushCredential,
  PushCredentialBody,
  PushedBody,
  Registered,
  RegisterBody,
  ReportBody,
  ReportPath,
  Runner,
  RunnerPage,
  RunnerPath,
  StoppedBody,
} from "../protocol/runners";
import { runStub, schedulerStub } from "../lib/stubs";
import type { ClaimAnswer } from "../run/claim-answer";

/** Stores a registration; when that fails, the registration token's use is given back. */
async function storeRegistration<T>(db: D1Database, tokenId: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    await returnRegistrationUse(db, tokenId).catch(() => {});
    throw err;
  }
}

/**
 * The version gate: below the minimum CLI version, or with no launch protocol in common, a runner
 * gets 426 before any work is handed out (dispatch-lifecycle.md, "The API enforces the minimum CLI version").
 */
export function checkRunnerVersion(config: Config, version: string, protocols: string[]): void {
  const details = { min_cli_version: config.minCliVersion, protocols: config.launchProtocols, upgrade: config.runnerUpgradeHint };
  if (!versionAtLeast(version, config.minCliVersion)) {
    throw new DocketError(
      "listener_upgrade_required",
      `runner CLI ${version} is older than the minimum ${config.minCliVersion}; to upgrade, ${config.runnerUpgradeHint}`,
      details,
    );
  }
  if (!protocols.some((p) => config.launchProtocols.includes(p))) {
    throw new DocketError(
      "listener_upgrade_required",
      `no launch protocol in common: the runner offers ${protocols.join(", ")}, this server supports ${config.launchProtocols.join(", ")}`,
      details,
    );
  }
}

/**
 * Report output is bounded: more lines than REPORT_LINES_MAX are refused (src/bounds.ts), long
 * lines are cut, and lines past the total are dropped with a note, so each output event fits one
 * Queue message.
 */
function boundLines(lines: string[], config: Config): string[] {
  const kept: string[] = [];
  let total = 0;
  for (const line of lines) {
    const cut = line.length > config.reportLineMaxChars ? `${line.slice(0, config.reportLineMaxChars)}… [cut]` : line;
    if (total + cut.length > config.reportOutputMaxChars) break;
    kept.push(cut);
    total += cut.length;
  }
  if (lines.length > kept.length) kept.push(`[${lines.length - kept.length} more lines dropped]`);
  return kept;
}

/** The agent's session as stored: its JSON text, or null when it gave none. */
function sessionText(session: unknown): string | null {
  return session === undefined || session === null ? null : JSON.stringify(session);
}

/** A checkpoint's configured bounds (CHECKPOINT_PATCH_MAX_CHARS, CHECKPOINT_SESSION_MAX_CHARS). */
function checkCheckpoint(config: Config, body: CheckpointBody): void {
  atMost("patch", body.patch.length, config.checkpointPatchMaxChars, "characters");
  atMost("session", sessionText(body.session)?.length ?? 0, config.checkpointSessionMaxChars, "characters");
}

/** The description of a machine's call about its attempt (launched, lease, launch-failed, stopped). */
function attemptOperation(id: string, summary: string): OperationSpec {
  return {
    id,
    summary,
    tag: "Runner protocol",
    auth: "machine",
    responses: { 200: { description: "The run as this attempt now sees it.", schema: AttemptAnswer } },
    errors: ["not_found", "other_organization", "other_machine", "stale_attempt", "lease_expired", "task_gone", "invalid_transition"],
  };
}

/** The machine holding attempt n of a run: who the run object checks the call against. */
interface AttemptHolder {
  orgId: string;
  attempt: number;
  machineId: string;
}

/** A machine's call about its attempt (POST /v1/runs/:id/attempts/:n/<path>): its body and the run object's RPC it becomes. */
interface AttemptCall<Body extends z.ZodType> {
  path: string;
  operation: OperationSpec;
  body: Body;
  send: (run: ReturnType<typeof runStub>, holder: AttemptHolder, body: z.output<Body>) => Promise<object>;
}

/** A row of the table, as the route it adds. */
function attemptCall<Body extends z.ZodType>(row: AttemptCall<Body>) {
  return (routes: Hono<AppEnv>) =>
    routes.post(
      `/runs/:id/attempts/:n/${row.path}`,
      operation(row.operation),
      validate("param", AttemptPath),
      validate("json", row.body),
      async (c) => {
        const { id, n } = c.req.valid("param");
        const caller = c.get("caller");
        const holder = { orgId: caller.orgId, attempt: n, machineId: caller.machineId! };
        // The validator parsed the body with row.body; its generic output type is not narrowed to it.
        return c.json(unwrap(await row.send(runStub(c.env, id), holder, c.req.valid("json") as z.output<Body>)));
      },
    );
}

/** The machine's calls about the attempt it holds, one row each. */
const ATTEMPT_CALLS = [
  attemptCall({
    path: "launched",
    operation: attemptOperation("reportLaunched", "Report that the attempt's sandbox started (with wait_ms, then wait as a lease does)"),
    body: LaunchedBody,
    send: (run, { orgId, attempt, machineId }, body) =>
      run.machineCall(orgId, { type: "launched", attempt, machineId, sandboxId: body.sandbox_id }, body.wait_ms ?? 0),
  }),
  attemptCall({
    path: "lease",
    operation: attemptOperation("renewLease", "Renew the attempt's lease; with wait_ms, then wait for a stop request"),
    body: LeaseBody,
    send: (run, { orgId, attempt, machineId }, body) => run.machineCall(orgId, { type: "lease", attempt, machineId }, body.wait_ms ?? 0),
  }),
  attemptCall({
    path: "push-credential",
    operation: {
      id: "issuePushCredential",
      summary: "A short-lived credential to push the publication branch",
      description:
        "For the machine holding a publishing attempt whose push is not yet reported; renews its lease. The token may write this one " +
        "repository's contents and is never stored: send it only with the push, never to the sandbox or the daemon.",
      tag: "Runner protocol",
      auth: "machine",
      responses: { 200: { description: "The token, the URL to push to and the branch.", schema: PushCredential } },
      errors: ["not_found", "other_organization", "other_machine", "stale_attempt", "lease_expired", "task_gone", "invalid_transition", "autopilot_not_configured", "publication_unavailable"],
    },
    body: PushCredentialBody,
    send: (run, { orgId, attempt, machineId }) => run.pushCredential(orgId, attempt, machineId),
  }),
  attemptCall({
    path: "pushed",
    operation: {
      ...attemptOperation("reportPushed", "Report that the publication branch was pushed"),
      description: "Recorded before Docket looks for or creates the pull request (which it does after answering). Reporting the recorded push again answers the same.",
    },
    body: PushedBody,
    send: (run, { orgId, attempt, machineId }, body) => run.pushed(orgId, { type: "pushed", attempt, machineId, branch: body.branch, headSha: body.head_sha }),
  }),
  attemptCall({
    path: "launch-failed",
    operation: attemptOperation("reportLaunchFailed", "Report that the attempt's sandbox could not start"),
    body: LaunchFailedBody,
    send: (run, { orgId, attempt, machineId }, body) => run.machineCall(orgId, { type: "launch_failed", attempt, machineId, error: body.error, jitter: 0 }),
  }),
  attemptCall({
    path: "stopped",
    operation: attemptOperation("reportStopped", "Report that the attempt's sandbox was stopped"),
    body: StoppedBody,
    send: (run, { orgId, attempt, machineId }, body) => run.machineCall(orgId, { type: "stopped", attempt, machineId, reason: body.reason ?? null }),
  }),
  attemptCall({
    path: "checkpoint-unusable",
    operation: attemptOperation("reportCheckpointUnusable", "Report that a continuation's checkpoint did not verify; the run goes back to paused with its hold"),
    body: CheckpointUnusableBody,
    send: (run, { orgId, attempt, machineId }, body) => run.machineCall(orgId, { type: "checkpoint_unusable", attempt, machineId, reason: body.reason }),
  }),
];

export const runnerRoutes = new Hono<AppEnv>()
  .get(
    "/runners",
    operation({
      id: "listRunners",
      summary: "List the organization's registered runner machines",
      tag: "Runners",
      auth: "member",
      responses: { 200: { description: "A page of runners, newest registration first; deregistered machines are not listed.", schema: RunnerPage } },
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("query", ListRunnersQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const conditions = [eq(machines.orgId, c.get("caller").orgId), isNull(machines.deregisteredAtMs)];
    const { kept, next } = await listPage(c.get("db"), machines, conditions, q.cursor, limit, { at: "registeredAtMs" });
    return c.json({ runners: kept.map(machineView), next_cursor: next });
  })
  .delete(
    "/runners/:id",
    operation({
      id: "deregisterRunner",
      summary: "Deregister a runner machine and revoke its machine token",
      description: "Deregistering a deregistered machine answers it unchanged. Its waiting claims end 401 machine_deregistered, handed no run; attempts it holds are taken back when their leases lapse.",
      tag: "Runners",
      auth: "admin",
      responses: { 200: { description: "The runner, deregistered.", schema: Runner } },
      errors: ["not_found"],
    }),
    validate("param", RunnerPath), async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const changed = await deregisterMachine(c.env.DB, caller.orgId, id, Date.now());
    const row = await drizzle(c.env.DB)
      .select()
      .from(machines)
      .where(and(eq(machines.orgId, caller.orgId), eq(machines.id, id)))
      .get();
    if (!row) throw new DocketError("not_found", `no runner ${id} in this organization`);
    // Its claims already past the token check get no work either; asked again on a repeat, so a
    // deregistration whose scheduler call failed is finished by the retry.
    await schedulerStub(c.env, caller.orgId).forgetMachine(id);
    if (changed) log("runner.deregistered", { org: caller.orgId, machine: id, by: caller.tokenId, reason: "an admin deregistered it" });
    return c.json(machineView(row));
  })
  .post(
    "/runners/register",
    operation({
      id: "registerRunner",
      summary: "Register a runner machine with a registration token",
      description: "Uses one of the registration token's uses; answers the machine token, shown once.",
      tag: "Runner protocol",
      auth: "registration",
      responses: { 201: { description: "The machine, its token and the runner configuration.", schema: Registered } },
      errors: ["listener_upgrade_required"],
    }),
    validate("json", RegisterBody, (config, body) => checkLabels(config, body.labels)), async (c) => {
    const body = c.req.valid("json");
    const config = c.get("config");
    checkRunnerVersion(config, body.cli_version, body.protocols);
    const { orgId, tokenId } = c.get("caller");
    const now = Date.now();
    // The registration token's use is taken first, atomically, so concurrent registrations never
    // exceed its max_uses; a token that no longer works is a 401 that says why.
    await takeRegistrationUse(c.env.DB, tokenId, now);
    const machineId = newId("mch");
    const token = newToken("machine");
    const tokenHash = await sha256Hex(token);
    const db = drizzle(c.env.DB);
    await storeRegistration(c.env.DB, tokenId, () => db.batch([
      db.insert(machines).values({
        id: machineId,
        orgId,
        name: body.name,
        labels: JSON.stringify(normalizeLabels(body.labels ?? [])),
        protocols: JSON.stringify(body.protocols),
        cliVersion: body.cli_version,
        registeredAtMs: now,
        lastSeenAtMs: now,
      }),
      db.insert(tokens).values({
        id: newId("tok"),
        orgId,
        kind: "machine",
        role: null,
        name: body.name,
        tokenHash,
        machineId,
        createdAtMs: now,
      }),
    ]));
    return c.json({ machine_id: machineId, machine_token: token, org_id: orgId, config: runnerConfig(config) }, 201);
  })
  .post(
    "/runners/heartbeat",
    operation({
      id: "heartbeat",
      summary: "Say the machine is alive, with its CLI version, protocols and (optionally) new labels",
      description: "Sent labels replace the machine's labels, so a runner changes its labels without registering anew.",
      tag: "Runner protocol",
      auth: "machine",
      responses: { 200: { description: "The server's time and the runner configuration.", schema: HeartbeatAnswer } },
      errors: ["listener_upgrade_required"],
    }),
    validate("json", HeartbeatBody), async (c) => {
    const body = c.req.valid("json");
    const config = c.get("config");
    const machineId = c.get("caller").machineId!;
    // The version is recorded even when it is refused, so operators see who needs the upgrade.
    const db = drizzle(c.env.DB);
    const seen = db
      .update(machines)
      .set({ cliVersion: body.cli_version, protocols: JSON.stringify(body.protocols), lastSeenAtMs: Date.now() })
      .where(eq(machines.id, machineId));
    if (body.labels) {
      // Labels are written only when they differ, so a runner that sends its configured labels with
      // every heartbeat costs the scheduler nothing until they change.
      const labels = JSON.stringify(normalizeLabels(body.labels));
      const [beat, relabel] = await db.batch([
        seen,
        db.update(machines).set({ labels }).where(and(eq(machines.id, machineId), ne(machines.labels, labels))),
      ]);
      addD1(c.get("cost"), beat.meta);
      addD1(c.get("cost"), relabel.meta);
      // The scheduler checks claims with the labels it read (durable-objects/claim-credentials.ts): it reads them again.
      if (relabel.meta.changes > 0) {
        await schedulerStub(c.env, c.get("caller").orgId).machineChanged(machineId);
        c.get("cost").doRequests += 1;
      }
    } else {
      addD1(c.get("cost"), (await seen).meta);
    }
    checkRunnerVersion(config, body.cli_version, body.protocols);
    c.header(COST_HEADER, formatCost(c.get("cost")));
    return c.json({ machine_id: machineId, server_time_ms: Date.now(), config: runnerConfig(config) });
  })
  .post(
    "/runners/claim",
    operation({
      id: "claimRun",
      summary: "Claim the next run this machine can serve (a long poll)",
      description: "Waits up to wait_ms (default: claim_wait_ms) for matching work. A machine waits on one claim at a time: its new claim ends the one it still has waiting (204).",
      tag: "Runner protocol",
      auth: "claim",
      responses: {
        200: { description: "An attempt of a run, granted to this machine.", schema: ClaimGrant },
        204: { description: "No work matched within the wait." },
      },
      errors: ["listener_upgrade_required", "too_many_waiters", "recovering"],
    }),
    validate("json", ClaimBody), async (c) => {
    const body = c.req.valid("json");
    const config = c.get("config");
    checkRunnerVersion(config, body.cli_version, body.protocols);
    const caller = c.get("caller");
    const cost = c.get("cost");
    // The scheduler checks the token, reads the machine's labels and records its heartbeat (durable-objects/claim-credentials.ts).
    const claimed: ClaimAnswer = await schedulerStub(c.env, caller.orgId).claim({
      orgId: caller.orgId,
      tokenHash: c.get("tokenHash"),
      protocols: body.protocols.filter((p) => config.launchProtocols.includes(p)),
      offered: { cli_version: body.cli_version, protocols: body.protocols },
      waitMs: body.wait_ms ?? config.claimWaitMs,
    });
    const { grant, cost: schedulerCost, shed, refused, held } = claimed;
    cost.doRequests += 1;
    addCost(cost, schedulerCost);
    c.header(COST_HEADER, formatCost(cost));
    if (refused) throw refusalError(refused);
    // A recovery under way after an outage or a deploy holds dispatch, and the claim moves it on (src/recovery.ts).
    if (held) {
      c.executionCtx.waitUntil(claimKick(c.env, config));
      throw new DocketError("recovering", held, { retry_after_ms: config.recoveryRetryAfterMs });
    }
    if (shed) {
      throw new DocketError("too_many_waiters", `this organization's scheduler already holds ${shed.limit} waiting claims; try again later`, {
        limit: shed.limit,
        retry_after_ms: config.claimWaitersRetryAfterMs,
      });
    }
    if (!grant) return c.body(null, 204);
    return c.json(grant, 200);
  })
  .post(
    "/runners/claim/cancel",
    operation({
      id: "cancelClaim",
      summary: "End the claim this machine leaves waiting (a runner that stops)",
      description: "The machine's waiting claim answers 204 at once, handed no work, so a run dispatched meanwhile goes to a runner that is there. Answers how many claims it ended; with none waiting, 0.",
      tag: "Runner protocol",
      auth: "machine",
      responses: { 200: { description: "The claims ended.", schema: ClaimCancelled } },
    }),
    validate("json", CancelClaimBody), async (c) => {
    const caller = c.get("caller");
    const ended = await schedulerStub(c.env, caller.orgId).cancelClaims(caller.orgId, caller.machineId!);
    const cost = c.get("cost");
    cost.doRequests += 1;
    c.header(COST_HEADER, formatCost(cost));
    return c.json({ machine_id: caller.machineId!, ended });
  })
  .post(
    "/runs/:id/attempts/:n/checkpoint",
    operation({
      id: "postCheckpoint",
      summary: "The daemon's checkpoint of a pausing attempt: the session, the work as a patch, the last phase",
      description: "Authorized by the run-attempt token of attempt n. Only a pausing run takes it; storing it makes the run paused.",
      tag: "Runner protocol",
      auth: "attempt",
      responses: { 200: { description: "The run as this attempt now sees it (paused).", schema: AttemptAnswer } },
      errors: ["unauthorized", "invalid_request", "not_found", "task_gone", "stale_attempt", "lease_expired", "invalid_transition"],
    }),
    validate("param", AttemptPath),
    validate("json", CheckpointBody, checkCheckpoint), async (c) => {
    const { id, n } = c.req.valid("param");
    const body = c.req.valid("json");
    const session = sessionText(body.session);
    const answer = await runStub(c.env, id).checkpoint(bearer(c.req.header("Authorization")), n, {
      checkpoint: {
        sessionId: body.session_id ?? null,
        lastPhase: body.last_phase ?? null,
        pendingActions: body.pending_actions ?? [],
        sourceRevision: body.source_revision ?? null,
        note: body.note ?? null,
        patchChars: body.patch.length,
        sessionChars: session === null ? null : session.length,
      },
      patch: body.patch,
      session,
    });
    return c.json(unwrap(answer));
  })
  .post(
    "/runs/:id/reports",
    operation({
      id: "postReport",
      summary: "The daemon's report: phase, output lines and, at the end, the outcome and artifact",
      description: "Authorized by the run-attempt token; counts as the attempt's heartbeat. A retry sends the same seq again.",
      tag: "Runner protocol",
      auth: "attempt",
      responses: { 200: { description: "The run as this attempt now sees it.", schema: AttemptAnswer } },
      errors: ["task_gone", "stale_attempt", "lease_expired", "invalid_transition", "stale_report"],
    }),
    validate("param", ReportPath),
    validate("json", ReportBody, checkReport), async (c) => {
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const config = c.get("config");
    const final = body.final
      ? {
          outcome: body.final.outcome,
          error: body.final.error ?? null,
          exitCodes: body.final.exit_codes ?? {},
          artifact: body.final.artifact
            ? {
                patch: body.final.artifact.patch,
                sourceRevision: body.final.artifact.source_revision ?? null,
                model: body.final.artifact.model ?? null,
                limitations: body.final.artifact.limitations ?? [],
              }
            : null,
          costCents: body.final.cost_cents ?? null,
          blocker: body.final.blocker ? blockerFromWire(body.final.blocker) : null,
        }
      : null;
    const token = bearer(c.req.header("Authorization"));
    const answer = await runStub(c.env, id).report(token, {
      seq: body.seq ?? null,
      phase: body.phase ?? null,
      lines: boundLines(body.lines ?? [], config),
      final,
    });
    return c.json(unwrap(answer));
  });

for (const addRoute of ATTEMPT_CALLS) addRoute(runnerRoutes);
