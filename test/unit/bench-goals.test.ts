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

const autopilotIdle = (readyIssues: number, perHour: number, lostTicks: number | null) => ({ ready_issues: readyIssues, per_hour: perHour, lost_webhook_ticks: lostTicks });

/** An autopilot section whose idle project is past its budget at 1,000 ready issues and never finds the lost webhook there. */
const autopilotRun = {
  config: { lostWebhookTicksMax: 10 },
  idle: [autopilotIdle(10, 60, 1), autopilotIdle(1_000, 9_060, null)],
  webhook: { samples: 50, counted_per_admitted: 3.04, labelled_to_queued_ms: { p50: 40, p99: 120 } },
  burst: { issues: 100, deliveries: 1_000, runs_admitted: 100, errors: 0 },
  publication: { samples: 3, counted_to_comment: { max: 7 } },
  shared: { issues_each: 120, ticks: 3, projects: [{ examined: 120 }, { examined: 117 }] },
};

const byMeasure = (rows: string[][], start: string) => rows.find((row) => row[0].startsWith(start))!;

describe("the goals table of a benchmark run", () => {
  it("gives each goal the run's figure, and says a goal missed at one depth is not met", () => {
    const rows = goalRows(run);
    expect(rows).toHaveLength(13);
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
    for (const start of ["requests per idle runner", "cancel requested", "HTTP requests per completed", "runner CLI idle RSS", "counted GitHub requests per hour", "a burst of deliveries"]) {
      const row = byMeasure(rows, start);
      expect(row[1]).toMatch(/did not run/);
      expect(row[4]).toBe("–");
    }
  });

  it("holds the idle autopilot project to 120 counted GitHub requests an hour at every N, and a lost webhook to 2 ticks", () => {
    const rows = goalRows({ sections: { autopilot: autopilotRun } });
    expect(byMeasure(rows, "counted GitHub requests per hour").slice(1)).toEqual(["60 – 9,060 (N = 10, 1,000)", "≤ 120 at every N", "an installation may make 5,000 an hour", "**no**"]);
    expect(byMeasure(rows, "cron ticks until a lost webhook")[1]).toBe("more than 10 at some N");
    expect(byMeasure(rows, "cron ticks until a lost webhook")[4]).toBe("**no**");
    expect(byMeasure(rows, "counted GitHub requests per admitted issue").slice(1, 3)).toEqual(["3.04", "≤ 3"]);
    expect(byMeasure(rows, "counted GitHub requests per admitted issue")[4]).toBe("**no**");
    expect(byMeasure(rows, "counted GitHub requests per published")[1]).toBe("7 (largest of 3)");
    expect(byMeasure(rows, "labelled → run queued").slice(1)).toEqual(["40 ms / 120 ms", "≤ 100 ms / 500 ms locally", "GitHub wants an answer within 10 s", "yes"]);
    expect(byMeasure(rows, "a burst of deliveries")[1]).toBe("100 / 0 (1,000 deliveries)");
    expect(byMeasure(rows, "a burst of deliveries")[4]).toBe("yes");
  });

  it("says an idle project within 120 an hour whose lost webhook is found in 2 ticks meets both goals, and one extra run of a burst does not", () => {
    const cheap = structuredClone(autopilotRun);
    cheap.idle = [autopilotIdle(10, 60, 1), autopilotIdle(10_000, 120, 2)];
    cheap.burst.runs_admitted = 101;
    const rows = goalRows({ sections: { autopilot: cheap } });
    expect(byMeasure(rows, "counted GitHub requests per hour")[4]).toBe("yes");
    expect(byMeasure(rows, "cron ticks until a lost webhook").slice(1, 2)).toEqual(["1 – 2"]);
    expect(byMeasure(rows, "cron ticks until a lost webhook")[4]).toBe("yes");
    expect(byMeasure(rows, "a burst of deliveries")[4]).toBe("**no**");
  });

  it("says two projects sharing an installation meet their goal only when every ready issue of each was examined in its first full pass", () => {
    const skipped = byMeasure(goalRows({ sections: { autopilot: autopilotRun } }), "two projects sharing an installation");
    expect(skipped.slice(1, 3)).toEqual(["120 of 120 and 117 of 120 (3 ticks)", "every one"]);
    expect(skipped[4]).toBe("**no**");
    const whole = structuredClone(autopilotRun);
    whole.shared.projects[1].examined = 120;
    expect(byMeasure(goalRows({ sections: { autopilot: whole } }), "two projects sharing an installation")[4]).toBe("yes");
  });
});
