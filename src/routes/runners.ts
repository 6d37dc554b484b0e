// The runner protocol: register, heartbeat, claim, the attempt calls and daemon reports
// (../shared/spec/dispatch-lifecycle.md; docs/protocol.md, "Runner protocol").

import { and, desc, eq, isNull } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { bearer, requireAdmin, requireAttemptToken, requireMachine, requireMember, requireRegistration } from "../auth";
import { checkLabels, checkReport } from "../bounds";
import { runnerConfig, type Config } from "../config";
import { BOUND_CEILINGS } from "../protocol/bounds";
import { versionAtLeast } from "../protocol/version";
import { deregisterMachine, machineView } from "../credentials/machines";
import { returnRegistrationUse, takeRegistrationUse } from "../credentials/tokens";
import { machines, tokens } from "../db/schema";
import { DocketError, unwrap } from "../errors";
import { addCost, addD1, COST_HEADER, countedBatch, formatCost } from "../lib/cost";
import { newId, newToken, sha256Hex } from "../lib/crypto";
import { log } from "../lib/log";
import { afterCursor, keysetCursor, pageOf, pageQuery, pageSize } from "../lib/pagination";
import { normalizeLabels } from "../run/labels";
import { validate } from "../validate";
import { attemptNumber, cliVersion, labelList, protocolList, runId } from "../protocol/common";
import { runStub, schedulerStub } from "../lib/stubs";

const registerBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    labels: labelList.optional(),
    protocols: protocolList,
    cli_version: cliVersion,
  })
  .strict();

// `labels`, when sent, replaces the machine's labels: `docket-runner listen --label` serves other labels than it registered with.
const heartbeatBody = z.object({ cli_version: cliVersion, protocols: protocolList, labels: labelList.optional() }).strict();

const claimBody = z
  .object({ cli_version: cliVersion, protocols: protocolList, wait_ms: z.number().int().min(0).max(600_000).optional() })
  .strict();

const listQuery = z.object(pageQuery(keysetCursor("mch_[0-9a-f]{24}"))).strict();

const attemptPath = z.object({ id: runId, n: attemptNumber });
const machinePath = z.object({ id: z.string().regex(/^mch_[0-9a-f]{24}$/, "must be a machine id like mch_<24 hex digits>") });

const launchedBody = z.object({ sandbox_id: z.string().min(1).max(200) }).strict();
const leaseBody = z.object({}).strict();
const launchFailedBody = z.object({ error: z.string().min(1).max(4_000) }).strict();
const stoppedBody = z.object({ sandbox_id: z.string().max(200).optional(), reason: z.string().max(4_000).optional() }).strict();

const reportBody = z
  .object({
    // The report's sequence number within its attempt (1, 2, …): a retry sends the same seq again.
    seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
    phase: z.string().min(1).max(64).nullable().optional(),
    lines: z.array(z.string().max(100_000)).max(BOUND_CEILINGS.reportLinesMax).optional(),
    final: z
      .object({
        outcome: z.enum(["completed", "failed"]),
        error: z.string().max(4_000).nullable().optional(),
        exit_codes: z.record(z.string().max(64), z.number().int()).optional(),
        artifact: z
          .object({
            patch: z.string().max(BOUND_CEILINGS.artifactPatchMaxChars),
            source_revision: z.string().max(64).nullable().optional(),
            model: z.string().max(200).nullable().optional(),
            limitations: z.array(z.string().max(2_000)).max(100).optional(),
          })
          .strict()
          .nullable()
          .optional(),
        cost_cents: z.number().int().min(0).nullable().optional(),
      })
      .strict()
      .nullable()
      .optional(),
  })
  .strict();

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

export const runnerRoutes = new Hono<AppEnv>()
  .get("/runners", requireMember, validate("query", listQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const conditions = [eq(machines.orgId, c.get("caller").orgId), isNull(machines.deregisteredAtMs)];
    if (q.cursor) conditions.push(afterCursor(machines.registeredAtMs, machines.id, q.cursor));
    const rows = await drizzle(c.env.DB)
      .select()
      .from(machines)
      .where(and(...conditions))
      .orderBy(desc(machines.registeredAtMs), desc(machines.id))
      .limit(limit + 1);
    const { kept, next } = pageOf(rows, limit, (m) => m.registeredAtMs);
    return c.json({ runners: kept.map(machineView), next_cursor: next });
  })
  .delete("/runners/:id", requireMember, requireAdmin, validate("param", machinePath), async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const changed = await deregisterMachine(c.env.DB, caller.orgId, id, Date.now());
    const row = await drizzle(c.env.DB)
      .select()
      .from(machines)
      .where(and(eq(machines.orgId, caller.orgId), eq(machines.id, id)))
      .get();
    if (!row) throw new DocketError("not_found", `no runner ${id} in this organization`);
    if (changed) log("runner.deregistered", { org: caller.orgId, machine: id, by: caller.tokenId, reason: "an admin deregistered it" });
    return c.json(machineView(row));
  })
  .post("/runners/register", requireRegistration, validate("json", registerBody, (config, body) => checkLabels(config, body.labels)), async (c) => {
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
  .post("/runners/heartbeat", requireMachine, validate("json", heartbeatBody), async (c) => {
    const body = c.req.valid("json");
    const config = c.get("config");
    const machineId = c.get("caller").machineId!;
    // The version is recorded even when it is refused, so operators see who needs the upgrade.
    const updated = await drizzle(c.env.DB)
      .update(machines)
      .set({
        cliVersion: body.cli_version,
        protocols: JSON.stringify(body.protocols),
        lastSeenAtMs: Date.now(),
        ...(body.labels ? { labels: JSON.stringify(normalizeLabels(body.labels)) } : {}),
      })
      .where(eq(machines.id, machineId));
    addD1(c.get("cost"), updated.meta);
    checkRunnerVersion(config, body.cli_version, body.protocols);
    c.header(COST_HEADER, formatCost(c.get("cost")));
    return c.json({ machine_id: machineId, server_time_ms: Date.now(), config: runnerConfig(config) });
  })
  .post("/runners/claim", requireMachine, validate("json", claimBody), async (c) => {
    const body = c.req.valid("json");
    const config = c.get("config");
    checkRunnerVersion(config, body.cli_version, body.protocols);
    const caller = c.get("caller");
    const cost = c.get("cost");
    const now = Date.now();
    // The machine's labels, and its last seen time, which claims move at most once per heartbeat
    // interval to keep claims cheap: one D1 round trip, its rows counted for Docket-Cost.
    const [[machine]] = await countedBatch<{ labels: string }>(cost, c.env.DB, [
      c.env.DB.prepare("SELECT labels FROM machines WHERE id = ? AND deregistered_at_ms IS NULL").bind(caller.machineId),
      c.env.DB.prepare("UPDATE machines SET last_seen_at_ms = ? WHERE id = ? AND last_seen_at_ms < ?").bind(
        now,
        caller.machineId,
        now - config.heartbeatIntervalMs,
      ),
    ]);
    if (!machine) throw new DocketError("unauthorized", "this machine is no longer registered", { reason: "machine_deregistered" });
    const protocols = body.protocols.filter((p) => config.launchProtocols.includes(p));
    const { grant, cost: schedulerCost, shed } = await schedulerStub(c.env, caller.orgId).claim({
      orgId: caller.orgId,
      machineId: caller.machineId!,
      labels: JSON.parse(machine.labels),
      protocols,
      waitMs: body.wait_ms ?? config.claimWaitMs,
    });
    cost.doRequests += 1;
    addCost(cost, schedulerCost);
    c.header(COST_HEADER, formatCost(cost));
    if (shed) {
      throw new DocketError("too_many_waiters", `this organization's scheduler already holds ${shed.limit} waiting claims; try again later`, {
        limit: shed.limit,
        retry_after_ms: config.claimWaitersRetryAfterMs,
      });
    }
    if (!grant) return c.body(null, 204);
    return c.json(grant, 200);
  })
  .post("/runs/:id/attempts/:n/launched", requireMachine, validate("param", attemptPath), validate("json", launchedBody), async (c) => {
    const { id, n } = c.req.valid("param");
    const caller = c.get("caller");
    const command = { type: "launched" as const, attempt: n, machineId: caller.machineId!, sandboxId: c.req.valid("json").sandbox_id };
    return c.json(unwrap(await runStub(c.env, id).machineCall(caller.orgId, command)));
  })
  .post("/runs/:id/attempts/:n/lease", requireMachine, validate("param", attemptPath), validate("json", leaseBody), async (c) => {
    const { id, n } = c.req.valid("param");
    const caller = c.get("caller");
    const command = { type: "lease" as const, attempt: n, machineId: caller.machineId! };
    return c.json(unwrap(await runStub(c.env, id).machineCall(caller.orgId, command)));
  })
  .post("/runs/:id/attempts/:n/launch-failed", requireMachine, validate("param", attemptPath), validate("json", launchFailedBody), async (c) => {
    const { id, n } = c.req.valid("param");
    const caller = c.get("caller");
    const command = { type: "launch_failed" as const, attempt: n, machineId: caller.machineId!, error: c.req.valid("json").error, jitter: 0 };
    return c.json(unwrap(await runStub(c.env, id).machineCall(caller.orgId, command)));
  })
  .post("/runs/:id/attempts/:n/stopped", requireMachine, validate("param", attemptPath), validate("json", stoppedBody), async (c) => {
    const { id, n } = c.req.valid("param");
    const caller = c.get("caller");
    const command = { type: "stopped" as const, attempt: n, machineId: caller.machineId!, reason: c.req.valid("json").reason ?? null };
    return c.json(unwrap(await runStub(c.env, id).machineCall(caller.orgId, command)));
  })
  .post("/runs/:id/reports", requireAttemptToken, validate("param", z.object({ id: runId })), validate("json", reportBody, checkReport), async (c) => {
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
