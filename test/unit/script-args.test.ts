// Docket's own scripts (npm start, the benchmarks, the long test runs) take --help and no other
// argument (scripts/cli-args.mjs): help lists every variable the script reads, and a mistyped
// argument stops the script before it starts a Worker or a long run.

import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(__dirname, "..", "..");

/** The scripts, as package.json names them, and the files whose variables their help must list. */
const SCRIPTS = [
  { script: "start", file: "scripts/start.mjs", reads: ["scripts/start.mjs"] },
  { script: "demo", file: "scripts/demo.mjs", reads: ["scripts/demo.mjs"] },
  { script: "bench", file: "bench/run.mjs", reads: ["bench/lib/config.mjs"] },
  { script: "bench:profile", file: "bench/profile.mjs", reads: ["bench/profile.mjs"] },
  { script: "bench:reopen", file: "bench/reopen.mjs", reads: ["bench/reopen.mjs"] },
  { script: "bench:commits", file: "bench/commits.mjs", reads: ["bench/commits.mjs"] },
  { script: "test:restart", file: "scripts/restart-chaos.mjs", reads: ["scripts/restart-chaos.mjs"] },
  { script: "test:pack", file: "test/e2e/pack-install.mjs", reads: [] },
];

/** Docket's settings a file reads from the environment (not wrangler's own, which it only passes on). */
function variablesRead(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const names = [...text.matchAll(/process\.env\.([A-Z][A-Z0-9_]+)|\b(?:int|ints|num|positiveWhole)\(["']([A-Z][A-Z0-9_]+)["']/g)].map((m) => m[1] ?? m[2]);
  return [...new Set(names)].filter((name) => !name.startsWith("WRANGLER_") && !name.startsWith("CLOUDFLARE_"));
}

const run = (file: string, args: string[]) =>
  spawnSync(process.execPath, [file, ...args], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });

describe("Docket's scripts on the command line", () => {
  const packageScripts = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts as Record<string, string>;

  for (const { script, file, reads } of SCRIPTS) {
    it(`npm run ${script} -- --help says what it does and lists every variable it reads`, () => {
      expect(packageScripts[script]).toBe(`node ${file}`);
      const help = run(file, ["--help"]);
      expect(help.status).toBe(0);
      expect(help.stderr).toBe("");
      expect(help.stdout.length).toBeGreaterThan(200);
      for (const name of reads.flatMap(variablesRead)) expect(help.stdout, `${name} in ${script}'s help`).toContain(name);
      expect(run(file, ["-h"]).stdout).toBe(help.stdout);
    });

    it(`npm run ${script} with an argument it does not take stops at once and says how to set it`, () => {
      const result = run(file, ["--depths", "10"]);
      expect(result.status).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr).toContain('unknown argument "--depths"');
      expect(result.stderr).toContain("-- --help");
    });
  }

  it("the variables found in a script are the ones it reads (the check above is not empty)", () => {
    expect(variablesRead("bench/lib/config.mjs")).toEqual(expect.arrayContaining(["BENCH_QUICK", "BENCH_DEPTHS", "BENCH_CLAIMS", "BENCH_OUT"]));
    expect(variablesRead("scripts/start.mjs")).toEqual(expect.arrayContaining(["PORT", "PERSIST_TO", "ADMIN_SECRET", "CRON_TICK_MS", "START_TIMEOUT_MS", "MIGRATE_ATTEMPTS", "MIGRATE_TIMEOUT_MS"]));
  });
});
