// Why a run waits: the explanation GET /v1/runs/:id and GET /v1/queue give for a run that is not
// being worked (docs/protocol.md, "Why a run waits"). It is read from what a claim would read — the
// queue rows, the connected runners, the run's hold and backoff — and changes nothing.

import { and, count, desc, eq, gte, isNull, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { alias } from "drizzle-orm/sqlite-core";
import type { Config } from "../config";
import { RECOVERY_ROW, recoveryHold } from "../recovery-hold";
import { managedPools } from "../db/managed-schema";
import { machines, runs, sweep } from "../db/schema";
import type { Env } from "../env";
import { covers, labelsKey, parseLabelsKey } from "./labels";

export type WaitingReason = "operator_hold" | "recovery" | "scheduler_gate" | "launch_backoff" | "no_runner" | "behind_runs" | "next_in_queue";

export interface Waiting {
  reason: WaitingReason;
  detail: {
    message: string;
    until_ms?: number;
    missing_labels?: string[];
    missing_protocol?: string | null;
    connected_runners?: number;
    closest_runner?: string | null;
    managed_pool?: string;
    ahead?: number;
    gate?: string;
  };
}

/** What the explanation needs of a run; both a run object's view and a queue row give it. */
export interface WaitingRun {
  id: string;
  orgId: string;
  state: string;
  hold: boolean;
  labels: string[];
  protocol: string;
  notBeforeMs: number;
  /** The autopilot project whose scheduler gates apply, if any. */
  projectId?: string | null;
}

/**
 * A scheduler gate holds claimable work back for a reason of its own (autopilot's gates, for one).
 * A gate that holds the run answers why; one that lets it through answers null. Gates are asked in
 * order, after an operator hold and before backoff, runners and queue position.
 */
export type SchedulerGate = (env: Env, run: WaitingRun, nowMs: number) => Promise<Waiting | null>;

/** An autopilot project's scheduler gates (docs/protocol.md, "Autopilot scheduler"), asked of the organization's scheduler. */
const autopilotGates: SchedulerGate = async (env, run) => {
  if (!run.projectId) return null;
  const closed = await env.SCHEDULER.get(env.SCHEDULER.idFromName(run.orgId)).closedGate(run.projectId, run.id);
  return closed ? { reason: "scheduler_gate", detail: { message: `its project's scheduler holds it: ${closed.reason}`, gate: closed.gate } } : null;
};

/** The gates asked for every queued run, in order. */
export const SCHEDULER_GATES: SchedulerGate[] = [autopilotGates];

/** Dispatch held for every run while unfinished runs are reconciled after an outage or a deploy (src/recovery-hold.ts). */
async function recoveryWaiting(env: Env, config: Config, nowMs: number): Promise<Waiting | null> {
  const row = await drizzle(env.DB).select(RECOVERY_ROW).from(sweep).where(eq(sweep.id, 1)).get();
  const held = recoveryHold(row, nowMs, config);
  return held ? { reason: "recovery", detail: { message: held } } : null;
}

export interface ConnectedRunner {
  id: string;
  labels: string[];
  protocols: string[];
}

/** Runners heard from within RUNNER_CONNECTED_WINDOW_MS, at most WAITING_RUNNERS_MAX, most recently seen first. */
export async function connectedRunners(db: D1Database, orgId: string, config: Config, nowMs: number): Promise<ConnectedRunner[]> {
  const rows = await drizzle(db)
    .select({ id: machines.id, labels: machines.labels, protocols: machines.protocols, lastSeenAtMs: machines.lastSeenAtMs })
    .from(machines)
    .where(and(eq(machines.orgId, orgId), gte(machines.lastSeenAtMs, nowMs - config.runnerConnectedWindowMs), isNull(machines.deregisteredAtMs)))
    .orderBy(desc(machines.lastSeenAtMs))
    .limit(config.waitingRunnersMax);
  return rows.map((r) => ({ id: r.id, labels: JSON.parse(r.labels) as string[], protocols: JSON.parse(r.protocols) as string[] }));
}

/**
 * Null when some connected runner covers the run; otherwise what is missing, measured against the
 * closest runner: one that speaks the protocol first, then the fewest labels short.
 */
export function missingRunner(run: Pick<WaitingRun, "labels" | "protocol">, runners: ConnectedRunner[]): Waiting | null {
  let best: { runner: ConnectedRunner; protocolOk: boolean; missing: string[] } | null = null;
  for (const runner of runners) {
    const protocolOk = runner.protocols.includes(run.protocol);
    const missing = run.labels.filter((l) => !runner.labels.includes(l));
    if (protocolOk && missing.length === 0) return null;
    const better = !best || (protocolOk && !best.protocolOk) || (protocolOk === best.protocolOk && missing.length < best.missing.length);
    if (better) best = { runner, protocolOk, missing };
  }
  const anySpeaks = runners.some((r) => r.protocols.includes(run.protocol));
  const missingLabels = best ? best.missing : run.labels;
  const missingProtocol = anySpeaks ? null : run.protocol;
  const lacks = [missingProtocol ? `protocol ${missingProtocol}` : null, missingLabels.length ? `labels ${missingLabels.join(", ")}` : null].filter(Boolean);
  const message =
    runners.length === 0
      ? `no runner is connected: one with protocol ${run.protocol}${run.labels.length ? ` and labels ${run.labels.join(", ")}` : ""} would take it`
      : `no connected runner covers it: the closest (${best!.runner.id}) lacks ${lacks.join(" and ")}`;
  return {
    reason: "no_runner",
    detail: { message, missing_labels: missingLabels, missing_protocol: missingProtocol, connected_runners: runners.length, closest_runner: best?.runner.id ?? null },
  };
}

/** A running managed pool (docs/managed-runners.md): the labels its runners register with. */
export interface RunningPool {
  id: string;
  name: string;
  labels: string[];
}

/** The organization's running managed pools, at most WAITING_RUNNERS_MAX; none where this deployment has no managed runners. */
export async function runningPools(env: Env, orgId: string, config: Config): Promise<RunningPool[]> {
  if (!env.MANAGED_RUNNER) return [];
  const rows = await drizzle(env.DB)
    .select({ id: managedPools.id, name: managedPools.name, labels: managedPools.labels })
    .from(managedPools)
    .where(and(eq(managedPools.orgId, orgId), eq(managedPools.state, "running")))
    .limit(config.waitingRunnersMax);
  return rows.map((r) => ({ ...r, labels: JSON.parse(r.labels) as string[] }));
}

/**
 * A run no connected runner covers, whose labels a running managed pool's runners would cover:
 * its reason stays no_runner, and it names the pool, whose scaler starts a runner for such work at
 * a cron tick while the pool is below its max_instances (src/managed/scaler.ts).
 */
export function withCoveringPool(waiting: Waiting, run: Pick<WaitingRun, "labels" | "protocol">, pools: RunningPool[], config: Config): Waiting {
  if (waiting.reason !== "no_runner") return waiting;
  const key = labelsKey(run.protocol, run.labels);
  const pool = pools.find((p) => covers(key, p.labels, config.managedRunnerProtocols));
  if (!pool) return waiting;
  const message = `${waiting.detail.message}; the managed pool ${pool.name} covers it, and starts a runner for it at a cron tick unless it already runs max_instances`;
  return { reason: waiting.reason, detail: { ...waiting.detail, message, managed_pool: pool.id } };
}

/** Queued runs ahead of this one in its own queue (same labels and protocol), in dispatch order. */
async function runsAhead(db: D1Database, run: WaitingRun): Promise<number> {
  const me = alias(runs, "me");
  const other = alias(runs, "other");
  // Queue order as one row-value comparison, as the queue index sorts (src/db/schema.ts, `runs_queue`).
  const before = sql`(${other.orderGroup}, ${other.orderPriority}, ${other.queuedAtMs}, ${other.id}) < (${me.orderGroup}, ${me.orderPriority}, ${me.queuedAtMs}, ${me.id})`;
  const row = await drizzle(db)
    .select({ ahead: count() })
    .from(other)
    .innerJoin(me, and(eq(other.orgId, me.orgId), eq(other.labelsKey, me.labelsKey)))
    .where(and(eq(me.id, run.id), eq(other.state, "queued"), before))
    .get();
  return row?.ahead ?? 0;
}

/** Why the run waits before anything about runners or its queue: its hold, a recovery, a scheduler gate, a backoff. */
async function heldBack(env: Env, run: WaitingRun, nowMs: number, recovery: Waiting | null): Promise<Waiting | null> {
  if (run.hold) {
    return { reason: "operator_hold", detail: { message: "an operator holds it; only an explicit resume releases it" } };
  }
  if (recovery) return recovery;
  for (const gate of SCHEDULER_GATES) {
    const held = await gate(env, run, nowMs);
    if (held) return held;
  }
  if (run.notBeforeMs > nowMs) {
    return {
      reason: "launch_backoff",
      detail: { message: `its last launch failed; it backs off until ${new Date(run.notBeforeMs).toISOString()}`, until_ms: run.notBeforeMs },
    };
  }
  return null;
}

/** The answer for a run `ahead` runs deep in its queue, which a connected runner covers. */
export function queuePosition(ahead: number): Waiting {
  if (ahead === 0) return { reason: "next_in_queue", detail: { message: "first in its queue: a covering runner takes it at its next claim", ahead } };
  return { reason: "behind_runs", detail: { message: `behind ${ahead} run${ahead === 1 ? "" : "s"} in its queue`, ahead } };
}

/** Why a queued (or operator-held) run is not being worked; null for a run in any other state. */
export async function whyWaiting(env: Env, config: Config, run: WaitingRun, nowMs: number): Promise<Waiting | null> {
  if (run.state !== "queued" && !(run.state === "paused" && run.hold)) return null;
  const held = await heldBack(env, run, nowMs, await recoveryWaiting(env, config, nowMs));
  if (held) return held;
  const missing = missingRunner(run, await connectedRunners(env.DB, run.orgId, config, nowMs));
  if (missing) return withCoveringPool(missing, run, await runningPools(env, run.orgId, config), config);
  return queuePosition(await runsAhead(env.DB, run));
}

/** A queued run as the queue shows it: its row, and why it waits. */
export interface QueuedRun {
  id: string;
  labels: string[];
  protocol: string;
  priority: number;
  queued_at_ms: number;
  not_before_ms: number;
  created_at_ms: number;
  title: string | null;
  project_id: string | null;
  waiting: Waiting;
}

/**
 * The organization's queued runs in dispatch order (continuations first, then priority, age, id:
 * ../shared/spec/run-lifecycle.md, "Queue and dispatch"), at most `limit`, each with why it waits.
 * Runs ahead are counted per queue as the list goes, so the whole list costs three reads plus gates.
 */
export async function queueInOrder(env: Env, config: Config, orgId: string, limit: number, nowMs: number): Promise<{ runs: QueuedRun[]; more: boolean }> {
  const rows = await drizzle(env.DB)
    .select()
    .from(runs)
    .where(and(eq(runs.orgId, orgId), eq(runs.state, "queued")))
    .orderBy(runs.orderGroup, runs.orderPriority, runs.queuedAtMs, runs.id)
    .limit(limit + 1);
  const runners = await connectedRunners(env.DB, orgId, config, nowMs);
  const pools = await runningPools(env, orgId, config);
  const recovery = await recoveryWaiting(env, config, nowMs);
  const aheadByKey = new Map<string, number>();
  const listed: QueuedRun[] = [];
  for (const row of rows.slice(0, limit)) {
    const { protocol, labels } = parseLabelsKey(row.labelsKey);
    const run: WaitingRun = { id: row.id, orgId, state: "queued", hold: false, labels, protocol, notBeforeMs: row.notBeforeMs, projectId: row.projectId };
    const key = labelsKey(protocol, labels);
    const ahead = aheadByKey.get(key) ?? 0;
    aheadByKey.set(key, ahead + 1);
    const missing = missingRunner(run, runners);
    const waiting = (await heldBack(env, run, nowMs, recovery)) ?? (missing && withCoveringPool(missing, run, pools, config)) ?? queuePosition(ahead);
    listed.push({
      id: row.id,
      labels,
      protocol,
      priority: -row.orderPriority,
      queued_at_ms: row.queuedAtMs,
      not_before_ms: row.notBeforeMs,
      created_at_ms: row.createdAtMs,
      title: row.title,
      project_id: row.projectId,
      waiting,
    });
  }
  return { runs: listed, more: rows.length > limit };
}
