// The benchmark's first table (bench/lib/goals.mjs): each goal with the run's figure, read from the
// sections of a run's results, met or not, and unmeasured when its section did not run.

import { describe, expect, it } from "vitest";
import { goalRows } from "../../bench/lib/goals.mjs";

const claimRow = (depth: number, docketPerS: number, floorPerS: number, rowsRead: number, largest: number) => ({
  depth,
  docket: { claims_per_s: docketPerS, cost: { d1_rows_read: { mean: rowsRead, max: largest } } },
  floor: { claims_per_s: floorPerS },
});

/** A run whose figures meet every goal but the throughput at one depth. */
const run = {
  sections: {
    claims: { concurrency: 4, rows: [claimRow(10, 120, 200, 6.6, 16), claimRow(100_000, 80, 200, 6.7, 11)] },
    idle: { defaults: { scaled_from_measured: 1.07 }, rss_mb: { max: 52.9 } },
    cancel: { cancel_to_stopped_ms: { p99: 106 }, polled: { lease_refresh_ms: 20_000 }, requests_per_cancelled_run: 5.07 },
    lifecycle: { rows: [{ requests_per_run: 5.01 }, { requests_per_run: 5.08 }] },
  },
};

const byMeasure = (rows: string[][], start: string) => rows.find((row) => row[0].startsWith(start))!;

describe("the goals table of a benchmark run", () => {
  it("gives each goal the run's figure, and says a goal missed at one depth is not met", () => {
    const rows = goalRows(run);
    expect(rows).toHaveLength(6);
    const throughput = byMeasure(rows, "claim throughput");
    expect(throughput[1]).toBe("0.40 – 0.60");
    expect(throughput[4]).toBe("**no**");
    expect(byMeasure(rows, "D1 rows read")).toEqual(["D1 rows read per successful claim, every depth (mean)", "6.6 – 6.7 (largest 16)", "≤ 10, flat", "the floor reads 3", "yes"]);
    expect(byMeasure(rows, "requests per idle runner").slice(1, 3)).toEqual(["1.07", "≤ 1.2"]);
    expect(byMeasure(rows, "cancel requested")[1]).toBe("106 ms");
    // The cancel path counts with the completed runs.
    expect(byMeasure(rows, "HTTP requests per completed")[1]).toBe("5.01 – 5.08");
    expect(byMeasure(rows, "runner CLI idle RSS")[1]).toBe("52.9 MB");
    expect(rows.filter((row) => row[4] === "yes")).toHaveLength(5);
  });

  it("says a figure past its goal is not met", () => {
    const slow = structuredClone(run);
    slow.sections.cancel.cancel_to_stopped_ms.p99 = 2_400;
    slow.sections.lifecycle.rows[1].requests_per_run = 5.2;
    slow.sections.idle.rss_mb.max = 61;
    const rows = goalRows(slow);
    expect(byMeasure(rows, "cancel requested")[4]).toBe("**no**");
    expect(byMeasure(rows, "HTTP requests per completed")[4]).toBe("**no**");
    expect(byMeasure(rows, "runner CLI idle RSS")[4]).toBe("**no**");
  });

  it("leaves the goals of a section that did not run unmeasured, never met", () => {
    const rows = goalRows({ sections: { claims: run.sections.claims } });
    for (const start of ["requests per idle runner", "cancel requested", "HTTP requests per completed", "runner CLI idle RSS"]) {
      const row = byMeasure(rows, start);
      expect(row[1]).toMatch(/did not run/);
      expect(row[4]).toBe("–");
    }
  });
});
