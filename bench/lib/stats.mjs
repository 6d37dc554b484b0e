// Summaries of measured samples. Percentiles are nearest-rank: p99 of fewer than 100 samples is
// the largest sample, and the reports say how many samples each figure has.

/** @param {number[]} sorted ascending @param {number} p 0..100 */
export function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** @param {number[]} values */
export function summarize(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const mean = n ? sorted.reduce((s, v) => s + v, 0) / n : null;
  return { n, mean, min: sorted[0] ?? null, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[n - 1] ?? null };
}

/** Rounds for the reports: integers stay, others keep `digits` decimals. */
export function round(value, digits = 2) {
  if (value === null || value === undefined || !Number.isFinite(value)) return null;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** A figure for the reports' tables, with `digits` decimals and thousands separated; "–" when there is none. */
export function formatted(value, digits = 1) {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** The lowest and highest of `values`, as "a – b" (one figure when they agree). @param {number[]} values @param {number} [digits] */
export function range(values, digits = 2) {
  const lo = formatted(Math.min(...values), digits);
  const hi = formatted(Math.max(...values), digits);
  return lo === hi ? lo : `${lo} – ${hi}`;
}

/** A goals table's last column. @param {boolean} ok */
export const met = (ok) => (ok ? 'yes' : '**no**');
