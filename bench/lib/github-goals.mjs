// The autopilot section's goals (docs/BENCHMARKS.md, "Autopilot within GitHub's budget") and its
// tables: what an autopilot project spends of its GitHub App installation's hourly request limit.
import { formatted as f, met, range } from './stats.mjs';

/** A GitHub App installation's REST requests an hour (more for large organizations). */
export const INSTALLATION_LIMIT_PER_HOUR = 5_000;

/**
 * The section's rows of the goals table: [measure, this run, goal, anchor, met].
 * @param {any} a the autopilot section of a run's results, or undefined when it did not run
 * @returns {string[][]}
 */
export function autopilotGoalRows(a) {
  const goals = [
    ['counted GitHub requests per hour, one idle project (queue capacity 5, no runner), every N ready issues', '≤ 120 at every N', `an installation may make ${f(INSTALLATION_LIMIT_PER_HOUR, 0)} an hour`],
    ['cron ticks until a lost webhook is found, every N', '≤ 2', 'GitHub never delivers a failed webhook again'],
    ['two projects sharing an installation: their ready issues examined in each one\'s first full pass', 'every one', 'a skipped issue\'s lost webhook is never recovered'],
    ['counted GitHub requests per admitted issue (webhook door)', '≤ 3', 'the issue, its blockers, its events'],
    ['counted GitHub requests per published pull request (push credential to comment)', '≤ 8', '–'],
    ['labelled → run queued, webhook door, p50 / p99', '≤ 100 ms / 500 ms locally', 'GitHub wants an answer within 10 s'],
    ['a burst of deliveries over 100 issues: runs admitted / errors', 'exactly 100 / 0', 'one run per issue, whatever is delivered'],
  ];
  if (!a) return goals.map(([measure, goal, anchor]) => [measure, '– (the autopilot section did not run)', goal, anchor, '–']);
  const perHour = a.idle.map((/** @type {any} */ row) => row.per_hour);
  const lost = a.idle.map((/** @type {any} */ row) => row.lost_webhook_ticks);
  const ns = a.idle.map((/** @type {any} */ row) => f(row.ready_issues, 0)).join(', ');
  const latency = a.webhook.labelled_to_queued_ms;
  const publication = a.publication?.counted_to_comment?.max;
  const figures = [
    [`${range(perHour, 0)} (N = ${ns})`, met(Math.max(...perHour) <= 120)],
    [lost.includes(null) ? `more than ${a.config.lostWebhookTicksMax} at some N` : range(lost, 0), met(!lost.includes(null) && Math.max(...lost) <= 2)],
    sharedFigure(a.shared),
    [f(a.webhook.counted_per_admitted, 2), met(a.webhook.counted_per_admitted <= 3)],
    a.publication?.failed ? [`– (not measured: ${a.publication.failed})`, '**no**'] :
    publication === undefined ? ['– (no publication measured)', '–'] : [`${f(publication, 0)} (largest of ${a.publication.samples})`, met(publication <= 8)],
    [`${f(latency.p50, 0)} ms / ${f(latency.p99, 0)} ms`, met(latency.p50 <= 100 && latency.p99 <= 500)],
    [`${a.burst.runs_admitted} / ${a.burst.errors} (${f(a.burst.deliveries, 0)} deliveries)`, met(a.burst.runs_admitted === a.burst.issues && a.burst.errors === 0)],
  ];
  return goals.map(([measure, goal, anchor], i) => [measure, figures[i][0], goal, anchor, figures[i][1]]);
}

/** The shared installation's figure and whether it met its goal: every ready issue of both projects examined. @param {any} shared */
function sharedFigure(shared) {
  if (!shared) return ['– (not measured)', '–'];
  const each = shared.projects.map((/** @type {any} */ p) => `${f(p.examined, 0)} of ${f(shared.issues_each, 0)}`).join(' and ');
  return [`${each} (${shared.ticks} ticks)`, met(shared.projects.every((/** @type {any} */ p) => p.examined === shared.issues_each))];
}
