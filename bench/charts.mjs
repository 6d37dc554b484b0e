// SVG charts of a benchmark run (docs/BENCHMARKS.md), written by hand: line charts with linear or
// logarithmic axes, one colour per series and a legend. No chart dependency.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { INSTALLATION_LIMIT_PER_HOUR } from './lib/github-goals.mjs';

const W = 640;
const H = 360;
const PAD = { left: 64, right: 32, top: 40, bottom: 76 };
const COLOURS = ['#1f6feb', '#d9480f', '#2b8a3e', '#862e9c'];

/** @param {string} s */
const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
/** @param {number} v */
const fmt = (v) => (Math.abs(v) >= 1000 ? v.toLocaleString('en-US', { maximumFractionDigits: 0 }) : String(Math.round(v * 100) / 100));

/** Axis ticks: powers of ten for a log axis, about five round steps for a linear one. @param {number} lo @param {number} hi @param {boolean} log */
function ticks(lo, hi, log) {
  if (log) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(10 ** e);
    return out;
  }
  const step = 10 ** Math.floor(Math.log10((hi - lo) / 5 || 1));
  const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => (hi - lo) / s <= 6) ?? step * 10;
  const out = [];
  for (let v = Math.ceil(lo / nice) * nice; v <= hi + 1e-9; v += nice) out.push(v);
  return out;
}

/** Where `v` falls between the pixels `from` and `to` on an axis from `lo` to `hi`, linear or log. */
const place = (/** @type {number} */ v, /** @type {number} */ lo, /** @type {number} */ hi, /** @type {boolean} */ log, /** @type {number} */ from, /** @type {number} */ to) =>
  from + ((log ? Math.log10(v) - Math.log10(lo) : v - lo) / (log ? Math.log10(hi) - Math.log10(lo) : hi - lo)) * (to - from);

/** A log axis's range: the powers of ten around the values. @param {number[]} values */
const decades = (values) => [10 ** Math.floor(Math.log10(Math.min(...values))), 10 ** Math.ceil(Math.log10(Math.max(...values)))];

/**
 * One line chart as SVG text.
 * @param {{ title: string, xLabel: string, yLabel: string, xLog?: boolean, yLog?: boolean, yMin?: number,
 *   series: { name: string, points: [number, number][], dashed?: boolean }[] }} c
 */
export function lineChart(c) {
  // A log axis shows positive values only.
  c = { ...c, series: c.series.map((s) => ({ ...s, points: s.points.filter((p) => (!c.xLog || p[0] > 0) && (!c.yLog || p[1] > 0)) })) };
  const all = c.series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  let [x0, x1] = c.xLog ? decades(xs) : [Math.min(...xs), Math.max(...xs)];
  if (x0 === x1) x1 = x0 + 1;
  let [y0, y1] = c.yLog ? decades(ys) : [c.yMin ?? 0, Math.max(...ys) * 1.1 || 1];
  if (y0 === y1) y1 = y0 * 10;
  const fx = (/** @type {number} */ x) => place(x, x0, x1, !!c.xLog, PAD.left, W - PAD.right);
  const fy = (/** @type {number} */ y) => place(y, y0, y1, !!c.yLog, H - PAD.bottom, PAD.top);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="13" font-weight="bold">${esc(c.title)}</text>`,
  ];
  for (const t of ticks(x0, x1, !!c.xLog)) {
    parts.push(`<line x1="${fx(t)}" x2="${fx(t)}" y1="${PAD.top}" y2="${H - PAD.bottom}" stroke="#eee"/>`);
    parts.push(`<text x="${fx(t)}" y="${H - PAD.bottom + 14}" text-anchor="middle">${fmt(t)}</text>`);
  }
  for (const t of ticks(y0, y1, !!c.yLog)) {
    parts.push(`<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${fy(t)}" y2="${fy(t)}" stroke="#eee"/>`);
    parts.push(`<text x="${PAD.left - 6}" y="${fy(t) + 4}" text-anchor="end">${fmt(t)}</text>`);
  }
  parts.push(`<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${H - PAD.bottom}" y2="${H - PAD.bottom}" stroke="#333"/>`);
  parts.push(`<line x1="${PAD.left}" x2="${PAD.left}" y1="${PAD.top}" y2="${H - PAD.bottom}" stroke="#333"/>`);
  parts.push(`<text x="${(PAD.left + W - PAD.right) / 2}" y="${H - PAD.bottom + 32}" text-anchor="middle">${esc(c.xLabel)}</text>`);
  parts.push(`<text transform="translate(14 ${(PAD.top + H - PAD.bottom) / 2}) rotate(-90)" text-anchor="middle">${esc(c.yLabel)}</text>`);
  c.series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const pts = s.points.map((p) => `${fx(p[0]).toFixed(1)},${fy(p[1]).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${pts}" fill="none" stroke="${colour}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    for (const p of s.points.length <= 12 ? s.points : []) parts.push(`<circle cx="${fx(p[0]).toFixed(1)}" cy="${fy(p[1]).toFixed(1)}" r="3" fill="${colour}"/>`);
    // One legend row per series, under the axis label.
    const lx = PAD.left;
    const ly = H - 8 - (c.series.length - 1 - i) * 14;
    parts.push(`<line x1="${lx}" x2="${lx + 20}" y1="${ly - 4}" y2="${ly - 4}" stroke="${colour}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    parts.push(`<text x="${lx + 26}" y="${ly}">${esc(s.name)}</text>`);
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** The share of samples at or below each sample: a distribution as a line. @param {number[]} samples */
export function cdf(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted.map((v, i) => /** @type {[number, number]} */ ([v, (i + 1) / sorted.length]));
}

/**
 * The charts of one run's results, written to `dir` as <name>-<chart>.svg.
 * @param {any} r the results @param {string} dir @param {string} name
 * @returns {{ file: string, title: string }[]}
 */
export function writeCharts(r, dir, name) {
  /** @type {{ file: string, title: string, svg: string }[]} */
  const charts = [];
  const c = r.sections.claims;
  if (c) {
    const by = (/** @type {(row: any) => number} */ f) => c.rows.map((/** @type {any} */ row) => /** @type {[number, number]} */ ([row.depth, f(row)]));
    charts.push({
      file: `${name}-claim-cost.svg`,
      title: 'D1 rows read per successful claim against queue depth',
      svg: lineChart({ title: 'D1 rows read per claim', xLabel: 'queued runs', yLabel: 'rows read (mean)', xLog: true, series: [
        { name: 'Docket', points: by((row) => row.docket.cost.d1_rows_read.mean) },
        { name: 'platform floor', points: by((row) => row.floor.cost.d1_rows_read.mean), dashed: true },
      ] }),
    });
    charts.push({
      file: `${name}-claim-throughput.svg`,
      title: `Claims per second by ${c.concurrency} runners at once against queue depth`,
      svg: lineChart({ title: `Claim throughput, ${c.concurrency} runners at once`, xLabel: 'queued runs', yLabel: 'claims per second', xLog: true, series: [
        { name: 'Docket', points: by((row) => row.docket.claims_per_s) },
        { name: 'platform floor', points: by((row) => row.floor.claims_per_s), dashed: true },
      ] }),
    });
  }
  const l = r.sections.latency;
  if (l?.long_poll_samples_ms) {
    charts.push({
      file: `${name}-dispatch-latency.svg`,
      title: 'Dispatch-to-claim latency: share of runs claimed within a time',
      svg: lineChart({ title: 'Dispatch to claim', xLabel: 'ms from dispatch to the claim\'s answer (log)', yLabel: 'share of runs claimed', xLog: true, series: [
        { name: `${l.waiting_runners} runners waiting on the long-poll`, points: cdf(l.long_poll_samples_ms) },
        { name: `1 runner polling every ${l.poll_interval_ms / 1000} s`, points: cdf(l.polling_samples_ms), dashed: true },
      ] }),
    });
  }
  const k = r.sections.cancel;
  if (k) {
    const refresh = k.polled.lease_refresh_ms;
    // A stop polled at the refresh waits a uniform share of the interval: its distribution is a straight line.
    const steps = Array.from({ length: 40 }, (_, i) => (refresh * (i + 1)) / 40);
    const polled = [1, 10, 100, ...steps].filter((x) => x <= refresh).map((x) => /** @type {[number, number]} */ ([x, x / refresh]));
    charts.push({
      file: `${name}-cancel-latency.svg`,
      title: 'Cancel latency: share of sandboxes stopped within a time of the cancel request',
      svg: lineChart({ title: 'Cancel requested to sandbox stopped', xLabel: 'ms (log)', yLabel: 'share of sandboxes stopped', xLog: true, series: [
        { name: 'waiting lease call, from the cancel request (measured)', points: cdf(k.samples_ms) },
        { name: `polled at each ${refresh / 1000} s lease refresh (computed)`, points: polled, dashed: true },
      ] }),
    });
  }
  const a = r.sections.autopilot;
  if (a) {
    const ns = a.idle.map((/** @type {any} */ row) => row.ready_issues);
    const flat = (/** @type {number} */ y) => ns.map((/** @type {number} */ x) => /** @type {[number, number]} */ ([x, y]));
    charts.push({
      file: `${name}-github-requests.svg`,
      title: "GitHub requests counted per hour by one idle autopilot project, against its ready issues, beside the installation's limit",
      svg: lineChart({ title: 'GitHub requests per hour, one idle project', xLabel: 'ready issues (log)', yLabel: 'counted requests per hour (log)', xLog: true, yLog: true, series: [
        { name: 'Docket (measured, one tick a minute)', points: a.idle.map((/** @type {any} */ row) => [row.ready_issues, row.per_hour]) },
        { name: `the installation's limit, ${INSTALLATION_LIMIT_PER_HOUR.toLocaleString('en-US')} an hour`, points: flat(INSTALLATION_LIMIT_PER_HOUR), dashed: true },
        { name: 'the goal, 120 an hour', points: flat(120), dashed: true },
      ] }),
    });
  }
  for (const chart of charts) writeFileSync(join(dir, chart.file), chart.svg);
  return charts.map(({ file, title }) => ({ file, title }));
}
