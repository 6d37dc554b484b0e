import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "sqlite",
  schema: ["./src/db/schema.ts", "./src/db/ledger-schema.ts", "./src/db/autopilot-schema.ts", "./src/db/tracker-schema.ts", "./src/db/session-schema.ts", "./src/db/github-schema.ts", "./src/db/managed-schema.ts"],
  out: "./migrations",
});
