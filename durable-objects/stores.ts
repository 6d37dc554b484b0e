// Each Durable Object class's store (durable-objects/store.ts): its drizzle schema, the migrations
// drizzle-kit generated from it, and the frozen hand-written steps that made its older objects.

import runMigrations from "./drizzle/run/migrations";
import schedulerMigrations from "./drizzle/scheduler/migrations";
import ticketMigrations from "./drizzle/ticket/migrations";
import { RUN_OBJECT_MIGRATIONS } from "./legacy/run-steps";
import { SCHEDULER_OBJECT_MIGRATIONS } from "./legacy/scheduler-steps";
import { TICKET_OBJECT_MIGRATIONS } from "./legacy/ticket-steps";
import * as runSchema from "./run-schema";
import * as schedulerSchema from "./scheduler-schema";
import type { StoreDefinition } from "./store";
import * as ticketSchema from "./ticket-schema";

export const RUN_STORE: StoreDefinition = { schema: runSchema, migrations: runMigrations, legacySteps: RUN_OBJECT_MIGRATIONS };
export const SCHEDULER_STORE: StoreDefinition = { schema: schedulerSchema, migrations: schedulerMigrations, legacySteps: SCHEDULER_OBJECT_MIGRATIONS };
export const TICKET_STORE: StoreDefinition = { schema: ticketSchema, migrations: ticketMigrations, legacySteps: TICKET_OBJECT_MIGRATIONS };
