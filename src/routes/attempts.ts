// The runner protocol's calls about one attempt: the machine's calls about the attempt it holds
// (launched, lease, push credential, pushed, launch failed, stopped, checkpoint unusable) and the
// daemon's checkpoint and reports (../shared/spec/dispatch-lifecycle.md; docs/protocol.md, "Runner protocol").

import { Hono } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../app-types";
import { bearer } from "../auth";
import { atMost, checkReport } from "../bounds";
import type { Config } from "../config";
import { unwrap } from "../errors";
import { runStub } from "../lib/stubs";
import { operation, type OperationSpec } from "../openapi/operation";
import {
  AttemptAnswer,
  AttemptPath,
  CheckpointBody,
  CheckpointUnusableBody,
  LaunchedBody,
  LaunchFailedBody,
  LeaseBody,
  PushCredential,
  PushCredentialBody,
  PushedBody,
  ReportBody,
  ReportPath,
  StoppedBody,
} from "../protocol/runners";
import { blockerFromWire } from "../run/blocker";
import { validate } from "../validate";

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

export const attemptRoutes = new Hono<AppEnv>()
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

for (const addRoute of ATTEMPT_CALLS) addRoute(attemptRoutes);
