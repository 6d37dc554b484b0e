// drizzle-kit's view of one Durable Object store: its schema file (durable-objects/<store>-schema.ts)
// and the folder its migrations, and the migrations.js the object imports, are written to. Each
// drizzle.<store>.config.ts at the root is this for one store; `npm run db:generate` runs them all.
import { defineConfig } from "drizzle-kit";

export function storeConfig(store: "run" | "scheduler" | "ticket") {
  return defineConfig({
    dialect: "sqlite",
    driver: "durable-sqlite",
    schema: `./durable-objects/${store}-schema.ts`,
    out: `./durable-objects/drizzle/${store}`,
  });
}
