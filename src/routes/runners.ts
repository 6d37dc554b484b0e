// The runner protocol's machine calls: register, heartbeat, claim and claim cancel, and the
// organization's list and deregistration of its runners (../shared/spec/dispatch-lifecycle.md;
// docs/protocol.md, "Runner protocol"). The calls about one attempt are in src/routes/attempts.ts.

import { and, eq, isNull, ne } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { checkLabels } from "../bounds";
import { runnerConfig, type Config } from "../config";
import { versionAtLeast } from "../protocol/version";
import { deregisterMachine, machineView } from "../credentials/machines";
import { returnRegistrationUse, takeRegistrationUse } from "../credentials/tokens";
import { machines, tokens } from "../db/schema";
import { DocketError, refusalError } from "../errors";
import { addCost, addD1, COST_HEADER, formatCost } from "../lib/cost";
import { newId, newToken, sha256Hex } from "../lib/crypto";
import { log } from "../lib/log";
import { listPage, pageSize } from "../lib/pagination";
import { d1Session } from "../lib/read-session";
import { claimKick } from "../recovery";
import { bookmarkHeader } from "../openapi/headers";
import { normalizeLabels } from "../run/labels";
import { validate } from "../validate";
import { operation } from "../openapi/operation";
import {
  CancelClaimBody,
  ClaimBody,
  ClaimCancelled,
  ClaimGrant,
  HeartbeatAnswer,
  HeartbeatBody,
  ListRunnersQuery,
  Registered,
  RegisterBody,
  Runner,
  RunnerPage,
  RunnerPath,
} from "../protocol/runners";
import { schedulerStub } from "../lib/stubs";
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

/** One machine of the organization, deregistered or not; another organization's is not found. */
async function readMachine(db: D1Database, orgId: string, id: string) {
  const row = await drizzle(db).select().from(machines).where(and(eq(machines.orgId, orgId), eq(machines.id, id))).get();
  if (!row) throw new DocketError("not_found", `no runner ${id} in this organization`);
  return row;
}

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
  .get(
    "/runners/:id",
    operation({
      id: "getRunner",
      summary: "Read one runner machine, deregistered or not",
      description: "A deregistered machine is still read, with deregistered_at_ms set, so the runs it ran keep a machine to name.",
      tag: "Runners",
      auth: "member",
      responses: { 200: { description: "The runner.", schema: Runner } },
      errors: ["not_found"],
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("param", RunnerPath), async (c) => {
    const row = await readMachine(c.get("db"), c.get("caller").orgId, c.req.valid("param").id);
    return c.json(machineView(row));
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
    const row = await readMachine(c.env.DB, caller.orgId, id);
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
  });
