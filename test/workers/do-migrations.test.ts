// Durable Object SQLite schema versions (durable-objects/sql-migrations.ts): a step added to the end
// of an object's list reaches a live object that already holds data, once.

import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { RUN_OBJECT_MIGRATIONS } from "../../durable-objects/run-schema";
import { migrate, schemaVersion, type MigrationStep } from "../../durable-objects/sql-migrations";
import { call, createOrg, dispatch, runStub } from "./helpers";

const addNote: MigrationStep = (sql) => sql.exec("ALTER TABLE run ADD COLUMN note TEXT NOT NULL DEFAULT 'none'");

describe("Durable Object schema migrations", () => {
  it("a run object records the version of its schema steps", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const version = await runInDurableObject(runStub(runId), (_o, state) => schemaVersion(state.storage.sql));
    expect(version).toBe(RUN_OBJECT_MIGRATIONS.length);
  });

  it("a step added to the list is applied once to a live run object, which keeps working", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const steps = [...RUN_OBJECT_MIGRATIONS, addNote];
    const after = await runInDurableObject(runStub(runId), (_o, state) => {
      const first = migrate(state.storage, steps);
      // ALTER TABLE ADD COLUMN fails when repeated: a second run must not apply the step again.
      const second = migrate(state.storage, steps);
      const note = state.storage.sql.exec<{ note: string }>("SELECT note FROM run").one().note;
      return { first, second, note };
    });
    expect(after).toEqual({ first: RUN_OBJECT_MIGRATIONS.length + 1, second: RUN_OBJECT_MIGRATIONS.length + 1, note: "none" });
    const read = await call("GET", `/v1/runs/${runId}`, { token: admin });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: runId, state: "queued" });
  });

  it("an object made before versions were recorded (tables, no version) takes step 1 and keeps its run", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const version = await runInDurableObject(runStub(runId), (_o, state) => {
      // Its tables as they were then: step 1's, without what later steps added.
      state.storage.sql.exec("DROP TABLE _schema");
      state.storage.sql.exec("DROP TABLE checkpoint_chunks");
      state.storage.sql.exec("ALTER TABLE outbox DROP COLUMN unconfirmed");
      state.storage.sql.exec("ALTER TABLE run DROP COLUMN slot_released_attempt");
      const before = schemaVersion(state.storage.sql);
      return { before, after: migrate(state.storage, RUN_OBJECT_MIGRATIONS) };
    });
    expect(version).toEqual({ before: 0, after: RUN_OBJECT_MIGRATIONS.length });
    const events = await call("GET", `/v1/runs/${runId}/events`, { token: admin });
    expect(events.status).toBe(200);
    expect(events.body.events[0].type).toBe("run.created");
  });
});
