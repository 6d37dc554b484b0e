// Durable Object SQLite schemas through drizzle (durable-objects/store.ts): a new object applies its
// store's generated migrations; an object the hand-written steps made (durable-objects/legacy/) is
// adopted with its rows; a migration added later reaches a live object once.

import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { describe, expect, it } from "vitest";
import { ticketStub } from "../../src/autopilot/admission";
import { migrate as migrateLegacy, schemaVersion, type MigrationStep } from "../../durable-objects/legacy/migrator";
import { RUN_OBJECT_MIGRATIONS } from "../../durable-objects/legacy/run-steps";
import { SCHEDULER_OBJECT_MIGRATIONS } from "../../durable-objects/legacy/scheduler-steps";
import { TICKET_OBJECT_MIGRATIONS } from "../../durable-objects/legacy/ticket-steps";
import { DRIZZLE_MIGRATIONS_TABLE, migrateStore, storeTables, type StoreDefinition } from "../../durable-objects/store";
import { RUN_STORE as RUN, SCHEDULER_STORE as SCHEDULER, TICKET_STORE as TICKET } from "../../durable-objects/stores";
import { call, createOrg, dispatch, runStub, schedulerOf } from "./helpers";

/** What an object's schema is, table by table: columns and indexes, their names and SQL text aside where SQLite words them by hand. */
function schemaOf(sql: SqlStorage) {
  const tables = sql
    .exec<{ name: string }>(
      `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('_schema', '${DRIZZLE_MIGRATIONS_TABLE}', '__miniflare_do_name')
       AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' ORDER BY name`,
    )
    .toArray()
    .map((r) => r.name);
  return tables.map((table) => ({
    table,
    // A hand-written PRIMARY KEY column without NOT NULL holds no null either: Docket never writes one.
    columns: sql
      .exec<{ name: string; type: string; notnull: number; dflt_value: string | null; pk: number }>(`PRAGMA table_info("${table}")`)
      .toArray()
      .map((c) => ({ name: c.name, type: c.type.toLowerCase(), notNull: c.notnull === 1 || c.pk > 0, default: c.dflt_value, pk: c.pk })),
    indexes: sql
      .exec<{ name: string; unique: number }>(`PRAGMA index_list("${table}")`)
      .toArray()
      .map((i) => ({ unique: i.unique, columns: sql.exec<{ name: string }>(`PRAGMA index_info("${i.name}")`).toArray().map((c) => c.name) }))
      .sort((a, b) => a.columns.join().localeCompare(b.columns.join())),
  }));
}

/** Empties the object's store, as if no code had touched it: its tables and both records of versions go. */
function dropStore(storage: DurableObjectStorage, store: StoreDefinition): void {
  for (const name of [...storeTables(store), "_schema", DRIZZLE_MIGRATIONS_TABLE]) storage.sql.exec(`DROP TABLE IF EXISTS "${name}"`);
}

/** The store as the hand-written steps made it (the first `steps` of them), with `rows` written by the old code's statements. */
function legacyObject(storage: DurableObjectStorage, store: StoreDefinition, rows: (sql: SqlStorage) => void, steps = store.legacySteps.length): number {
  dropStore(storage, store);
  const version = migrateLegacy(storage, store.legacySteps.slice(0, steps));
  rows(storage.sql);
  return version;
}

/** A generated migration after the baseline, as drizzle-kit writes one for a new column. */
function withNewColumn(store: StoreDefinition, table: string, column: string): StoreDefinition {
  const entries = store.migrations.journal.entries;
  const last = entries[entries.length - 1];
  const idx = last.idx + 1;
  const key = `m${String(idx).padStart(4, "0")}`;
  return {
    ...store,
    migrations: {
      journal: { entries: [...entries, { idx, when: last.when + 1, tag: `${String(idx).padStart(4, "0")}_${column}`, breakpoints: true }] },
      migrations: { ...store.migrations.migrations, [key]: `ALTER TABLE \`${table}\` ADD \`${column}\` text DEFAULT 'none' NOT NULL;` },
    },
  };
}

/**
 * Makes the object's store as the hand-written steps did, with `rows`, then starts it as the new code
 * does, twice, with a migration adding `table`.note after the baseline: what it kept and how its
 * schema reads once that migration is taken back out (so it compares with a new object's).
 */
async function adoptWithNewColumn(storage: DurableObjectStorage, store: StoreDefinition, table: string, rows: (sql: SqlStorage) => void, steps?: number) {
  const legacyVersion = legacyObject(storage, store, rows, steps);
  const withNote = withNewColumn(store, table, "note");
  await migrateStore(storage, drizzle(storage), withNote);
  await migrateStore(storage, drizzle(storage), withNote); // a second start applies nothing again
  const notes = storage.sql.exec<{ note: string }>(`SELECT note FROM "${table}"`).toArray().map((r) => r.note);
  storage.sql.exec(`ALTER TABLE "${table}" DROP COLUMN note`);
  storage.sql.exec(`DELETE FROM ${DRIZZLE_MIGRATIONS_TABLE} WHERE created_at > ?`, whens(store).at(-1)!);
  return { legacyVersion, adoptedAt: schemaVersion(storage.sql), notes, applied: appliedMigrations(storage.sql), schema: schemaOf(storage.sql) };
}

/** Every row of the store's tables, to write back into the old layout. */
function rowsOf(sql: SqlStorage, store: StoreDefinition): { table: string; rows: Record<string, SqlStorageValue>[] }[] {
  return storeTables(store).map((table) => ({ table, rows: sql.exec(`SELECT * FROM "${table}"`).toArray() }));
}

function writeRows(sql: SqlStorage, saved: ReturnType<typeof rowsOf>): void {
  for (const { table, rows } of saved) {
    for (const row of rows) {
      const columns = Object.keys(row);
      sql.exec(`INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`, ...columns.map((c) => row[c]));
    }
  }
}

const appliedMigrations = (sql: SqlStorage) => sql.exec(`SELECT created_at FROM ${DRIZZLE_MIGRATIONS_TABLE} ORDER BY created_at`).toArray().map((r) => Number(r.created_at));
const whens = (store: StoreDefinition) => store.migrations.journal.entries.map((e) => e.when);

describe("the ticket store (durable-objects/ticket-schema.ts)", () => {
  const at = (n: number) => ({ projectId: "apj_migrations", ticketKey: `github:octo/migrations#${n}` });

  /** The old TicketStore's statements: a ticket that admitted a run, a delivery, a history entry, and its carry-over done. */
  const oldRows = (sql: SqlStorage) => {
    sql.exec(
      `INSERT INTO ticket (id, ticket_key, project_id, org_id, number, status, reasons, generation, admitted_generation, pending_generation, run_id, updated_at_ms,
         withdraw_run_id, withdraw_reason, withdraw_attempts) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      "github:octo/migrations#1", "apj_migrations", "org_1", 1, "admitted", JSON.stringify(["ready"]), "gen-1", "gen-1", null, "run_old", 1_000, null, null, 0,
    );
    sql.exec("INSERT INTO deliveries (delivery_id, seen_at_ms) VALUES (?, ?)", "delivery-old", Date.now());
    sql.exec("INSERT INTO history (entry) VALUES (?)", JSON.stringify({ kind: "admitted", at_ms: 1_000, door: "webhook", generation: "gen-1", run_id: "run_old", reasons: [] }));
    sql.exec("INSERT INTO carried_over (id, at_ms, run_id) VALUES (1, ?, ?)", 1_000, "run_old");
  };

  it("a new ticket object records each generated migration as applied and takes no hand-written step", async () => {
    const state = await runInDurableObject(ticketStub(env, at(2)), (_o, s) => ({ applied: appliedMigrations(s.storage.sql), legacy: schemaVersion(s.storage.sql) }));
    expect(state).toEqual({ applied: whens(TICKET), legacy: 0 });
  });

  it("a ticket object the hand-written steps made keeps its rows, takes a new column once, and has a new object's schema", async () => {
    const stub = ticketStub(env, at(1));
    const adopted = await runInDurableObject(stub, (_o, s) => adoptWithNewColumn(s.storage, TICKET, "ticket", oldRows));
    expect(adopted.legacyVersion).toBe(TICKET_OBJECT_MIGRATIONS.length);
    expect(adopted.notes).toEqual(["none"]);
    expect(adopted.applied).toEqual(whens(TICKET));
    const read = await stub.read(at(1));
    expect(read).toMatchObject({ status: "admitted", run_id: "run_old", generation: "gen-1", reasons: ["ready"], history: [{ kind: "admitted", run_id: "run_old" }] });
    const fresh = await runInDurableObject(ticketStub(env, at(3)), (_o, s) => schemaOf(s.storage.sql));
    expect(adopted.schema.map((t) => t.table)).toEqual(["carried_over", "deliveries", "history", "last_error", "ticket"]);
    expect(adopted.schema.find((t) => t.table === "ticket")?.columns).toHaveLength(15);
    expect(adopted.schema).toEqual(fresh);
  });
});


describe("the run store (durable-objects/run-schema.ts)", () => {
  it("a new run object records each generated migration as applied and takes no hand-written step", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const state = await runInDurableObject(runStub(runId), (_o, s) => ({ applied: appliedMigrations(s.storage.sql), legacy: schemaVersion(s.storage.sql) }));
    expect(state).toEqual({ applied: whens(RUN), legacy: 0 });
  });

  it("a run object the hand-written steps made keeps its run and events, takes a new column once, and has a new object's schema", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const adopted = await runInDurableObject(runStub(runId), (_o, s) => {
      const saved = rowsOf(s.storage.sql, RUN);
      return adoptWithNewColumn(s.storage, RUN, "run", (sql) => writeRows(sql, saved));
    });
    expect(adopted.legacyVersion).toBe(RUN_OBJECT_MIGRATIONS.length);
    expect(adopted.notes).toEqual(["none"]);
    expect(adopted.applied).toEqual(whens(RUN));
    const read = await call("GET", `/v1/runs/${runId}`, { token: admin });
    expect(read.body).toMatchObject({ id: runId, state: "queued" });
    const events = await call("GET", `/v1/runs/${runId}/events`, { token: admin });
    expect(events.body.events.map((e: { type: string }) => e.type)).toEqual(["run.created"]);
    const fresh = await runInDurableObject(runStub(await dispatch(admin)), (_o, s) => schemaOf(s.storage.sql));
    expect(adopted.schema.map((t) => t.table)).toEqual(["artifact_chunks", "attempt_tokens", "checkpoint_chunks", "outbox", "run"]);
    expect(adopted.schema).toEqual(fresh);
  });

  it("a run object made before versions were recorded (step 1's tables, no version) takes every step and keeps its run", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const version = await runInDurableObject(runStub(runId), async (_o, state) => {
      // Its tables as they were then: step 1's, without what later steps added, and no record of either kind.
      state.storage.sql.exec(`DROP TABLE ${DRIZZLE_MIGRATIONS_TABLE}`);
      state.storage.sql.exec("DROP TABLE checkpoint_chunks");
      state.storage.sql.exec("ALTER TABLE outbox DROP COLUMN unconfirmed");
      state.storage.sql.exec("ALTER TABLE run DROP COLUMN slot_released_attempt");
      const before = schemaVersion(state.storage.sql);
      await migrateStore(state.storage, drizzle(state.storage), RUN);
      return { before, after: schemaVersion(state.storage.sql), applied: appliedMigrations(state.storage.sql) };
    });
    expect(version).toEqual({ before: 0, after: RUN_OBJECT_MIGRATIONS.length, applied: whens(RUN) });
    const events = await call("GET", `/v1/runs/${runId}/events`, { token: admin });
    expect(events.status).toBe(200);
    expect(events.body.events[0].type).toBe("run.created");
  });

  it("a hand-written step added to the frozen list is applied once to a live run object, which keeps working", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const addNote: MigrationStep = (sql) => sql.exec("ALTER TABLE run ADD COLUMN note TEXT NOT NULL DEFAULT 'none'");
    const steps = [...RUN_OBJECT_MIGRATIONS, addNote];
    const after = await runInDurableObject(runStub(runId), (_o, state) => {
      // The object as the hand-written steps left it: their record of its version, at the end of their list.
      state.storage.sql.exec("CREATE TABLE _schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)");
      state.storage.sql.exec("INSERT INTO _schema (id, version) VALUES (1, ?)", RUN_OBJECT_MIGRATIONS.length);
      const first = migrateLegacy(state.storage, steps);
      // ALTER TABLE ADD COLUMN fails when repeated: a second run must not apply the step again.
      const second = migrateLegacy(state.storage, steps);
      const note = state.storage.sql.exec<{ note: string }>("SELECT note FROM run").one().note;
      state.storage.sql.exec("ALTER TABLE run DROP COLUMN note");
      state.storage.sql.exec("DROP TABLE _schema");
      return { first, second, note };
    });
    expect(after).toEqual({ first: RUN_OBJECT_MIGRATIONS.length + 1, second: RUN_OBJECT_MIGRATIONS.length + 1, note: "none" });
    const read = await call("GET", `/v1/runs/${runId}`, { token: admin });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: runId, state: "queued" });
  });
});

describe("the scheduler store (durable-objects/scheduler-schema.ts)", () => {
  /** The old SchedulerGates' statements at step 1 (slots not yet per attempt): a project's gates, a slot and a budget hold. */
  const oldRows = (sql: SqlStorage) => {
    sql.exec(
      `INSERT INTO project_gates (project_id, enabled, draining, dispatch_window, concurrency, budget_limit_cents, budget_per_run_cents,
         budget_spent_cents, budget_reset_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      "apj_old", 1, 0, null, 3, 10_000, 2_500, 700, null, 1_000,
    );
    sql.exec("INSERT INTO slots (run_id, project_id, org_id, taken_at_ms, checked_at_ms) VALUES (?, ?, ?, ?, ?)", "run_old", "apj_old", "org_old", 1_000, 1_000);
    sql.exec(
      "INSERT INTO budget_holds (run_id, project_id, reserved_cents, status, cost_cents, created_at_ms, updated_at_ms) VALUES (?, ?, ?, 'held', NULL, ?, ?)",
      "run_old", "apj_old", 2_500, 1_000, 1_000,
    );
  };

  it("a new scheduler object records each generated migration as applied and takes no hand-written step", async () => {
    const state = await runInDurableObject(schedulerOf("org_migrations_new"), (_o, s) => ({ applied: appliedMigrations(s.storage.sql), legacy: schemaVersion(s.storage.sql) }));
    expect(state).toEqual({ applied: whens(SCHEDULER), legacy: 0 });
  });

  it("a scheduler object the hand-written steps made keeps its gates, slot and hold, takes a new column once, and has a new object's schema", async () => {
    const stub = schedulerOf("org_migrations_old");
    const adopted = await runInDurableObject(stub, (_o, s) => adoptWithNewColumn(s.storage, SCHEDULER, "project_gates", oldRows, 1));
    expect(adopted).toMatchObject({ legacyVersion: 1, adoptedAt: SCHEDULER_OBJECT_MIGRATIONS.length, notes: ["none"], applied: whens(SCHEDULER) });
    const view = await stub.schedulerView("apj_old");
    // The slot taken before slots were per attempt is attempt 0's, as the hand-written step 2 made it.
    expect(view).toMatchObject({ concurrency_limit: 3, slots: [{ run_id: "run_old", attempt: 0, taken_at_ms: 1_000 }], budget_held_cents: 2_500, budget_spent_cents: 700 });
    expect(view.gates).toMatchObject({ enabled: true, draining: false, budget: { limitCents: 10_000, perRunCents: 2_500 } });
    const fresh = await runInDurableObject(schedulerOf("org_migrations_fresh"), (_o, s) => schemaOf(s.storage.sql));
    expect(adopted.schema.map((t) => t.table)).toEqual(["budget_holds", "project_gates", "slots"]);
    expect(adopted.schema).toEqual(fresh);
  });
});
