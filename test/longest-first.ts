// The order test files start in. Vitest's own order runs one project after the other and, with no
// timings from an earlier run (a fresh clone), larger files first; the model lanes are small files
// that take minutes, so they came last and ran alone on one core while the other had nothing left.
// These files take longest (about a minute or more each, on a 2-core machine with the suite around them): they start first, in this order, and the
// others fill the cores around them.

import { BaseSequencer, type TestSpecification } from "vitest/node";

const LONGEST = [
  "test/e2e/start.test.mjs",
  "test/workers/security-matrix.test.ts",
  "test/workers/model-1.test.ts",
  "test/workers/model-2.test.ts",
  "test/workers/model-3.test.ts",
  "runner-cli/test/docker-engine.test.mjs",
  "test/e2e/restart.test.mjs",
  "test/workers/model-4.test.ts",
  "test/e2e/dashboard-pages.test.mjs",
  "test/workers/model-5.test.ts",
  "test/workers/fuzz.test.ts",
  "test/e2e/runner.test.mjs",
];

const rank = (spec: TestSpecification): number => {
  const i = LONGEST.findIndex((path) => spec.moduleId.endsWith(`/${path}`));
  return i === -1 ? LONGEST.length : i;
};

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    // Array.prototype.sort is stable: files not listed keep Vitest's order after the listed ones.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
