// The type of drizzle-kit's migrations.js beside this file (durable-objects/store.ts).
import type { StoreMigrations } from "../../store";

declare const migrations: StoreMigrations;
export default migrations;
