// The autopilot section's part of the results page (bench/lib/report.mjs): the idle project at each
// N ready issues, the webhook door, the burst and publication, in GitHub requests counted against
// the installation's limit (docs/BENCHMARKS.md, "Autopilot within GitHub's budget").
import { formatted as n } from './stats.mjs';

/** The counted requests by kind, largest first: "issue 30, events 30". @param {Record<string, number>} byKind */
const kinds = (byKind) =>
  Object.entries(byKind)
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || 'none';

/**
 * The section's markdown, or nothing when it did not run.
 * @param {any} a @param {(head: string[], rows: (string | number)[][]) => string} table @param {(suffix: string) => void} chart
 * @returns {string[]}
 */
export function autopilotTables(a, table, chart) {
  if (!a) return [];
  const out = [
    `\n### Autopilot within GitHub's budget\n\n` +
      `GitHub requests that count against the installation's limit (every answer but a 304), through a counting proxy in front of the GitHub stand-in. ` +
      `One idle project (queue capacity 5, no runner) alone in its Docket, N issues labelled ready by a person: warm-up cron ticks until its first full pass finished ` +
      `(${a.config.warmupTicks} to ${a.config.warmupTicksMax}), then ${a.config.windowTicks} ticks counted, extrapolated to one tick a minute; then one more issue is labelled with its webhook lost, ` +
      `and ticks run until its ticket is admitted or waits for capacity (at most ${a.config.lostWebhookTicksMax}).\n`,
    table(
      ['ready issues', 'seeded in', 'warm-up: ticks, counted, time', 'counted per tick', 'per hour', 'answered 304', 'counted in the window, by kind', 'tick p50 ms', 'ticks until a lost webhook is found'],
      a.idle.map((/** @type {any} */ row) => [
        n(row.ready_issues, 0),
        row.seed_ms === undefined ? '–' : `${n(row.seed_ms, 0)} ms`,
        `${row.warmup_ticks}${row.first_pass_finished ? '' : ' (first pass unfinished)'}, ${n(row.warmup_counted, 0)}${row.warmup_ms === undefined ? '' : `, ${n(row.warmup_ms / 1000, 1)} s`}`,
        n(row.per_tick, 1),
        n(row.per_hour, 0),
        `${n(row.answered_304_pct, 1)} %`,
        kinds(row.by_kind),
        n(row.tick_ms.p50, 0),
        row.lost_webhook_ticks ?? `more than ${a.config.lostWebhookTicksMax}`,
      ]),
    ),
  ];
  chart('-github-requests.svg');
  const w = a.webhook;
  const b = a.burst;
  const p = a.publication;
  const s = a.shared;
  out.push(
    (s
      ? `\nTwo projects of one installation (queue capacity 5 each, no runner), each with ${n(s.issues_each, 0)} ready issues in a repository of its own: ` +
        `${s.projects.map((/** @type {any} */ x) => `${n(x.examined, 0)}${x.first_pass_finished ? '' : ' (first pass unfinished)'}`).join(' and ')} of them examined (admitted or waiting for capacity) after ${s.ticks} ticks (until both first full passes had finished, at most ${a.config.warmupTicksMax}).\n`
      : '') +
    `\nWebhook door: ${w.samples} issues, one at a time, each labelled and its delivery posted; ${n(w.counted_per_admitted, 2)} counted requests per admitted issue (${kinds(w.by_kind)}). ` +
      `Labelled → run queued (from the delivery's post to the run read queued, ticket and run polled every 5 ms): ` +
      `p50 ${n(w.labelled_to_queued_ms.p50, 0)} ms, p99 ${n(w.labelled_to_queued_ms.p99, 0)} ms, largest ${n(w.labelled_to_queued_ms.max, 0)} ms.\n\n` +
      `Burst: ${n(b.deliveries, 0)} labelled deliveries, each with its own delivery id, over ${b.issues} issues, ${b.concurrency} at a time in shuffled order: ` +
      `${b.runs_admitted} runs admitted, ${b.errors} deliveries not answered 202; all answered in ${n(b.answered_ms / 1000, 1)} s, ${b.every_issue_admitted === false ? 'not every issue admitted' : 'every issue admitted'} after ${n(b.admitted_ms / 1000, 1)} s` +
      (b.consumed_ms === undefined ? '' : b.every_delivery_consumed ? `, every delivery consumed after ${n(b.consumed_ms / 1000, 1)} s` : `, deliveries still consumed after ${n(b.consumed_ms / 1000, 1)} s`) +
      `; ` +
      `${n(b.counted_per_run, 2)} counted requests per run.` +
      (p?.failed
        ? `\n\nPublication: not measured: ${p.failed}.`
        : p
        ? `\n\nPublication: ${p.samples} pull request(s) published by the real runner CLI (an agent that edits the README, a local bare repository as the remote), one at a time: ` +
          `${n(p.counted_to_comment.mean, 1)} counted requests from the push credential to the issue's comment (largest ${n(p.counted_to_comment.max, 0)}; all of them: ${kinds(p.by_kind ?? {})}), ` +
          `${n(p.counted_whole.mean, 1)} to the last tracker delivery (the label move included).`
        : ''),
  );
  return out;
}
