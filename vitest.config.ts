import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";
import { LongestFirst } from "./test/longest-first.ts";

declare const process: { env: Record<string, string | undefined> };

// Tests run offline: local Workers started by tests neither send telemetry nor fetch `Request.cf`.
process.env.WRANGLER_SEND_METRICS ??= "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";

// Every test's local state is throwaway: each Workers test file's Durable Objects and D1 (Miniflare
// keeps them under the temp directory), and the local Workers, databases and runner homes of the
// end-to-end tests. It is kept in memory where the machine allows (scripts/scratch-in-memory.mjs).
async function scratchInMemory(): Promise<void> {
  // A Node script, typed here: this file is type-checked with the Workers' types, not Node's.
  const scratch = (await import("./scripts/scratch-in-memory.mjs" as string)) as { scratchInMemory: () => unknown };
  scratch.scratchInMemory();
}

// Two projects: tests inside the Workers runtime (the Worker, its Durable Objects, D1 and the
// Queue, all local), and Node tests (the runner CLI and end-to-end runs against a local Worker).
export default defineConfig(async () => {
  await scratchInMemory();
  const migrations = await readD1Migrations("./migrations");
  // Node's os module, typed here: this file is type-checked with the Workers' types, not Node's.
  const { availableParallelism } = (await import("node:os" as string)) as { availableParallelism: () => number };
  return {
    test: {
      // Three test files per two cores (a percentage here would stop at one per core). Vitest's
      // default leaves one core free, which on a 2-core machine runs every file one after another;
      // one file per core still left a third of the CPU idle, because much of a file's time is
      // waiting (long-polls, leases, child processes, the start of its runtime).
      // `npm test -- --maxWorkers=1` runs them one at a time again.
      maxWorkers: Math.ceil(availableParallelism() * 1.5),
      // The longest files start first, across both projects (test/longest-first.ts).
      sequence: { sequencer: LongestFirst },
      // The Worker's structured log lines (src/lib/log.ts) and a local Worker's Queue deliveries stay
      // out of the test output; tests that check them spy on console.log. Vitest reads this option
      // here, not in a project.
      onConsoleLog: (line: string) => !line.startsWith("{\"msg\"") && !line.startsWith("[wrangler:info] QUEUE "),
      projects: [
        {
          plugins: [
            cloudflareTest({
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  TEST_MIGRATIONS: migrations,
                  ADMIN_SECRET: "test-admin-secret",
                  AUTOPILOT_SECRET_KEY: "test-autopilot-secret-key-0123456789abcdef",
                  // Short long-polls keep "nothing came" answers quick; other timings keep their defaults.
                  CLAIM_WAIT_MS: "1000",
                  // Tests make tokens that expire within milliseconds; test/workers/credentials.test.ts checks the real minimum.
                  TOKEN_TTL_MIN_MS: "1",
                  // Every answer of every suite is checked against the OpenAPI document (src/openapi/operation.ts).
                  CONTRACT_CHECK: "enforce",
                  BACKOFF_BASE_MS: "1000",
                  BACKOFF_MAX_MS: "8000",
                  // Tracker deliveries retry within a test's patience: 1 s doubling, 3 tries (test/workers/blockers.test.ts).
                  TRACKER_DELIVERY_BACKOFF_BASE_MS: "1000",
                  TRACKER_DELIVERY_MAX_ATTEMPTS: "3",
                  // Model-based tests (test/workers/model-harness.ts): how many sequences, their length, and one
                  // seed for every lane of this run, printed so that MODEL_SEED=<seed> replays them.
                  MODEL_RUNS: process.env.MODEL_RUNS ?? "",
                  MODEL_SEED: process.env.MODEL_SEED ?? String(Math.floor(Math.random() * 2 ** 31)),
                  MODEL_STEPS: process.env.MODEL_STEPS ?? "",
                },
                // The Durable Objects' generated migrations import .sql files as text, as wrangler.toml's [[rules]] say.
                modulesRules: [{ type: "Text", include: ["**/*.sql"], fallthrough: true }],
                // Suites make thousands of calls from one token: the real limits are far above them.
                // test/workers/rate-limit.test.ts puts the low RATE_LIMIT_TEST_* bindings in their place.
                ratelimits: {
                  RATE_LIMIT_ADDRESS: { simple: { limit: 1_000_000, period: 60 } },
                  RATE_LIMIT_MEMBER: { simple: { limit: 1_000_000, period: 60 } },
                  RATE_LIMIT_RUNNER: { simple: { limit: 1_000_000, period: 60 } },
                  RATE_LIMIT_TEST_ADDRESS: { simple: { limit: 5, period: 60 } },
                  RATE_LIMIT_TEST_MEMBER: { simple: { limit: 5, period: 60 } },
                  RATE_LIMIT_TEST_RUNNER: { simple: { limit: 5, period: 60 } },
                },
              },
            }),
          ],
          test: {
            name: "workers",
            include: ["test/workers/**/*.test.ts"],
            setupFiles: ["./test/workers/apply-migrations.ts"],
            // Every test file starts its own runtime and imports the Worker again, module by module: the
            // libraries go in as one pre-bundled module each, about a second less per file.
            deps: {
              optimizer: {
                ssr: {
                  enabled: true,
                  include: [
                    "hono", "hono/factory", "hono/http-exception", "hono/html", "hono/secure-headers", "hono/jsx", "hono/csrf", "hono/cookie", "hono/body-limit",
                    "hono-openapi", "zod", "drizzle-orm", "drizzle-orm/d1", "drizzle-orm/sqlite-core", "drizzle-orm/durable-sqlite", "drizzle-orm/durable-sqlite/migrator",
                    "@octokit/webhooks", "@octokit/plugin-throttling", "@octokit/plugin-retry", "@octokit/core", "@octokit/auth-app", "bottleneck/light.js", "fast-check",
                  ],
                },
              },
            },
            testTimeout: 30_000,
          },
        },
        // Managed runners' containers (durable-objects/managed-runner.ts) on the local Docker engine:
        // the pool turns containers off, so this project gives the engine, the egress stand-in and the
        // image scripts/containers-engine.sh builds (test/containers/engine.mjs runs it first).
        {
          plugins: [
            cloudflareTest({
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: { TEST_MIGRATIONS: migrations, ADMIN_SECRET: "test-admin-secret", CONTRACT_CHECK: "enforce", LEASE_TTL_MS: "6000", LEASE_REFRESH_MS: "1000", HEARTBEAT_INTERVAL_MS: "1000", CLAIM_WAIT_MS: "2000", DAEMON_SILENCE_MS: "8000" },
                modulesRules: [{ type: "Text", include: ["**/*.sql"], fallthrough: true }],
                containerEngine: { localDocker: { socketPath: "unix:///var/run/docker.sock", containerEgressInterceptorImage: "docket-egress:local" } },
                durableObjects: { MANAGED_RUNNER: { className: "ManagedRunner", useSQLite: true, container: { imageName: "docket-managed-runner:local" } } },
              },
            }),
          ],
          test: {
            name: "containers",
            include: ["test/containers/**/*.test.ts"],
            setupFiles: ["./test/workers/apply-migrations.ts"],
            globalSetup: ["./test/containers/engine.mjs"],
            testTimeout: 180_000,
            hookTimeout: 180_000,
          },
        },
        {
          test: {
            name: "node",
            environment: "node",
            // The runner CLI the tests start is its TypeScript build: build it once, before them; and
            // apply the D1 migrations once, to the template every local Docket starts from.
            globalSetup: ["./runner-cli/test/helpers/build.mjs", "./test/e2e/migrated-state.mjs"],
            include: ["test/e2e/**/*.test.{ts,mjs}", "runner-cli/test/**/*.test.{ts,mjs}", "test/unit/**/*.test.ts"],
            testTimeout: 120_000,
            hookTimeout: 120_000,
          },
        },
      ],
    },
  };
});
