// The D1 queue row is a projection of the run object, written only with a newer version
// (../shared/DESIGN.md, "D1 holds the queue and the credit ledger"). The statements are fixed
// statements over the tables of src/db/schema.ts (`runs`, `label_sets`, `ended_runs`), built once
// (src/db/fixed-statement.ts): every claim and report writes one (docs/BENCHMARKS.md, "What a claim costs").

import { getTableColumns, sql } from "drizzle-orm";
import { endedRuns, labelSets, runMachines, runs } from "../db/schema";
import { excluded, fixedStatement, placeholders, textOnly } from "../db/fixed-statement";
import { labelsKey } from "./labels";
import type { RunRecord } from "./types";

// What a run is given at dispatch and never changes is written once, with the row: a column in an
// upsert's SET rewrites every index it is in, changed or not, and D1 bills each index entry as a row
// written (the project's index would cost every claim and report one more).
const { id: _id, orgId: _orgId, createdAtMs: _createdAtMs, projectId: _projectId, ...projected } = getTableColumns(runs);

/** The run's queue row, replaced only by a newer version; its id, organization, creation time and project are kept. */
const UPSERT_RUN = fixedStatement<typeof runs.$inferInsert>(
  textOnly
    .insert(runs)
    .values(placeholders(getTableColumns(runs)))
    .onConflictDoUpdate({ target: runs.id, set: excluded(projected), setWhere: sql`excluded.version > ${runs.version}` }),
);

const LABEL_SET = fixedStatement<typeof labelSets.$inferInsert>(textOnly.insert(labelSets).values(placeholders(getTableColumns(labelSets))).onConflictDoNothing());
const ENDED_RUN = fixedStatement<typeof endedRuns.$inferInsert>(textOnly.insert(endedRuns).values(placeholders(getTableColumns(endedRuns))).onConflictDoNothing());
const RUN_MACHINE = fixedStatement<typeof runMachines.$inferInsert>(textOnly.insert(runMachines).values(placeholders(getTableColumns(runMachines))).onConflictDoNothing());

/**
 * Writes the run's queue row, with `also` in the same D1 batch (a claim's events,
 * durable-objects/outbox.ts); answers with the rows D1 read and wrote (src/lib/cost.ts).
 */
export async function projectRun(db: D1Database, run: RunRecord, also: D1PreparedStatement[] = []): Promise<D1Meta> {
  const key = labelsKey(run.launch.protocol, run.labels);
  const upsert = UPSERT_RUN.bind(db, {
    id: run.id,
    orgId: run.orgId,
    state: run.state,
    attempt: run.attempt,
    version: run.version,
    labelsKey: key,
    protocol: run.launch.protocol,
    orderGroup: run.continuation ? 0 : 1,
    orderPriority: -run.priority,
    queuedAtMs: run.queuedAtMs,
    notBeforeMs: run.notBeforeMs,
    createdAtMs: run.createdAtMs,
    updatedAtMs: run.updatedAtMs,
    projectId: run.projectId ?? null,
    ...listed(run),
  });
  const row = alongside(db, run, key);
  const statements = [upsert, ...(row === null ? [] : [row]), ...machinesOf(db, run), ...also];
  if (statements.length === 1) return (await upsert.run()).meta;
  // One batch, the queue row first: a scheduler that removes an emptied label set between them
  // either sees this queued row (and keeps the set) or is followed by this re-insert.
  const results = await db.batch(statements);
  return sumMeta(results.map((r) => r.meta));
}

/** The most characters of a brief's first line the runs list keeps as the run's title. */
export const RUN_TITLE_MAX_CHARS = 200;

/** A brief's first non-empty line, at most RUN_TITLE_MAX_CHARS (an autopilot run's brief starts with its issue's title). */
export function runTitle(brief: string): string {
  const line = brief.split("\n").find((l) => l.trim() !== "") ?? "";
  return line.trim().slice(0, RUN_TITLE_MAX_CHARS);
}

/** What the runs list shows of the run besides its queue fields: title, repository, machine, start and end. */
function listed(run: RunRecord) {
  const latest = run.steps[run.steps.length - 1];
  return {
    title: runTitle(run.brief),
    repositoryUrl: run.repository?.url ?? null,
    machineId: run.machineId ?? latest?.machineId ?? null,
    startedAtMs: run.steps[0]?.claimedAtMs ?? null,
    endedAtMs: run.endedAtMs,
  };
}

/**
 * The row that goes with the queue row: a queued run's label set (the scheduler reads only sets
 * with queued work), or an ended run's place in the queue of event pruning (src/retention.ts).
 */
function alongside(db: D1Database, run: RunRecord, key: string): D1PreparedStatement | null {
  if (run.state === "queued") return LABEL_SET.bind(db, { orgId: run.orgId, labelsKey: key, createdAtMs: run.updatedAtMs });
  if (run.endedAtMs !== null) return ENDED_RUN.bind(db, { runId: run.id, endedAtMs: run.endedAtMs });
  return null;
}

/**
 * The run's machines for the runs list's filter by machine: one row for each machine an attempt of
 * the run was claimed by (a row already there is left as it is, and written by none but the claim
 * that added its machine), so a write the alarm makes later still records an attempt whose own
 * write failed.
 */
function machinesOf(db: D1Database, run: RunRecord): D1PreparedStatement[] {
  const machines = new Set(run.steps.map((step) => step.machineId));
  return [...machines].map((machineId) => RUN_MACHINE.bind(db, { orgId: run.orgId, machineId, runCreatedAtMs: run.createdAtMs, runId: run.id }));
}

function sumMeta(metas: D1Meta[]): D1Meta {
  const total = { ...metas[0] };
  for (const m of metas.slice(1)) {
    total.rows_read += m.rows_read;
    total.rows_written += m.rows_written;
  }
  return total;
}
