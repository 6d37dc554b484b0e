// Docket's performance goals, each with a run's figure, the goal, what anchors it (the floor Worker
// in bench/floor/, runners people already use) and whether the run met it: the first table of the
// results (docs/BENCHMARKS.md, "Latest results"). A section the run skipped leaves its goals unmeasured.

import { autopilotGoalRows } from './github-goals.mjs';
import { formatted, met, range } from './stats.mjs';

/** The goals' figures: two decimals unless said. @param {number} v @param {number} [digits] */
const f = (v, digits = 2) => formatted(v, digits);


/**
 * One row per goal: [measure, this run, goal, anchor, met].
 * @param {any} r a run's results (bench/results/*.json)
 * @returns {string[][]}
 */
export function goalRows(r) {
  const { claims, idle, cancel, lifecycle } = r.sections;
  const unmeasured = (/** @type {string} */ section) => `– (the ${section} section did not run)`;
  const rows = [];

  if (claims) {
    const ratios = claims.rows.map((/** @type {any} */ row) => row.docket.claims_per_s / row.floor.claims_per_s);
    const floors = claims.rows.map((/** @type {any} */ row) => row.floor.claims_per_s);
    rows.push([
      `claim throughput ÷ floor, ${claims.concurrency} runners at once, every depth`,
      range(ratios),
      '≥ 0.5 at every depth',
      `the floor Worker: ${range(floors, 0)} claims/s`,
      met(Math.min(...ratios) >= 0.5),
    ]);
    const reads = claims.rows.map((/** @type {any} */ row) => row.docket.cost.d1_rows_read.mean);
    const largest = Math.max(...claims.rows.map((/** @type {any} */ row) => row.docket.cost.d1_rows_read.max));
    rows.push(['D1 rows read per successful claim, every depth (mean)', `${range(reads, 1)} (largest ${largest})`, '≤ 10, flat', 'the floor reads 3', met(Math.max(...reads) <= 10)]);
  } else {
    rows.push(['claim throughput ÷ floor', unmeasured('claims'), '≥ 0.5 at every depth', 'the floor Worker', '–']);
    rows.push(['D1 rows read per successful claim', unmeasured('claims'), '≤ 10, flat', 'the floor reads 3', '–']);
  }

  const idleRate = idle?.defaults?.scaled_from_measured;
  rows.push([
    'requests per idle runner per minute, at the defaults',
    idleRate === undefined ? unmeasured('idle') : f(idleRate),
    '≤ 1.2',
    "GitHub Actions runner's 50 s long-poll ≈ 1.2; GitLab Runner's 3 s poll = 20",
    idleRate === undefined ? '–' : met(idleRate <= 1.2),
  ]);

  const cancelP99 = cancel?.cancel_to_stopped_ms?.p99;
  rows.push([
    'cancel requested → sandbox stopped (agent that exits on SIGTERM), p99',
    cancelP99 === undefined ? unmeasured('cancel') : `${f(cancelP99, 0)} ms`,
    '≤ 2,000 ms',
    `a stop polled at the lease refresh: up to ${cancel ? f(cancel.polled.lease_refresh_ms, 0) : '20,000'} ms; Buildkite: the next status ping`,
    cancelP99 === undefined ? '–' : met(cancelP99 <= 2_000),
  ]);

  const perRun = [...(lifecycle?.rows ?? []).map((/** @type {any} */ row) => row.requests_per_run), ...(cancel ? [cancel.requests_per_cancelled_run] : [])];
  rows.push([
    'HTTP requests per completed short run, the cancel path included',
    perRun.length === 0 ? unmeasured('lifecycle') : range(perRun),
    '≤ 5.1',
    '5 calls: dispatch, claim, launched, a report, the final report',
    perRun.length === 0 ? '–' : met(Math.max(...perRun) <= 5.1),
  ]);

  const rss = idle?.rss_mb?.max;
  rows.push(['runner CLI idle RSS (`docket-runner listen`, largest)', rss === undefined ? unmeasured('idle') : `${f(rss, 1)} MB`, '≤ 60 MB', '–', rss === undefined ? '–' : met(rss <= 60)]);
  rows.push(...autopilotGoalRows(r.sections.autopilot));
  return rows;
}
