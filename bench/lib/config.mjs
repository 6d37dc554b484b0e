// The benchmark's settings: every one an environment variable with a documented default
// (docs/BENCHMARKS.md, "Settings"). BENCH_QUICK=1 shortens everything for a quick look.

const QUICK = /^(1|true|yes)$/i.test(process.env.BENCH_QUICK ?? '');

/** Docket's own defaults that the idle cost is scaled to (src/config.ts). */
export const DOCKET_DEFAULTS = { claimWaitMs: 55_000, heartbeatIntervalMs: 30_000, leaseRefreshMs: 20_000 };

/**
 * @param {string} name @param {number} full @param {number} quick
 * @returns {number}
 */
function int(name, full, quick = full) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return QUICK ? quick : full;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  return n;
}

/** @param {string} name @param {number[]} full @param {number[]} quick */
function ints(name, full, quick = full) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return QUICK ? quick : full;
  const list = raw.split(',').map((s) => Number(s.trim().replace(/_/g, '')));
  if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`${name} must be a comma-separated list of whole numbers, got ${JSON.stringify(raw)}`);
  return list;
}

const SECTIONS = ['claims', 'latency', 'lifecycle', 'scale', 'cancel', 'idle', 'autopilot'];

/** Settings that change what is measured (not where results go or how long a run may take). */
const MEASURING = Object.keys(process.env).filter(
  (k) => k.startsWith('BENCH_') && !['BENCH_QUICK', 'BENCH_OUT', 'BENCH_UPDATE_DOCS', 'BENCH_TIMEOUT_MS', 'BENCH_SOURCE'].includes(k),
);

/** The section a run measures alone with otherwise default settings, or null. @param {string[]} sections */
function oneSection(sections) {
  return sections.length === 1 && MEASURING.length === 1 && MEASURING[0] === 'BENCH_SECTIONS' ? sections[0] : null;
}

export function readConfig() {
  const sections = (process.env.BENCH_SECTIONS ?? SECTIONS.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = sections.filter((s) => !SECTIONS.includes(s));
  if (unknown.length) throw new Error(`BENCH_SECTIONS: unknown ${unknown.join(', ')} (choose from ${SECTIONS.join(', ')})`);
  const source = process.env.BENCH_SOURCE || 'worktree';
  if (source !== 'worktree' && source !== 'head') throw new Error(`BENCH_SOURCE must be worktree or head, got ${JSON.stringify(source)}`);
  const depths = ints('BENCH_DEPTHS', [10, 1_000, 10_000, 100_000], [10, 1_000, 10_000]);
  for (let i = 1; i < depths.length; i++) if (depths[i] <= depths[i - 1]) throw new Error('BENCH_DEPTHS must grow from one depth to the next');
  return {
    quick: QUICK,
    // Results are named for the run: latest (the defaults), quick, custom (other settings), or the
    // one section a run with otherwise default settings measured (autopilot), kept beside latest.
    name: QUICK ? 'quick' : oneSection(sections) ?? (MEASURING.length > 0 ? 'custom' : 'latest'),
    sections,
    source,
    claims: {
      depths,
      claims: int('BENCH_CLAIMS', 200, 40),
      concurrency: int('BENCH_CONCURRENCY', 4),
      seedBatch: int('BENCH_SEED_BATCH', 10_000),
    },
    latency: {
      samples: int('BENCH_LATENCY_SAMPLES', 100, 15),
      waitingRunners: int('BENCH_WAITING_RUNNERS', 4),
      pollIntervalMs: int('BENCH_POLL_INTERVAL_MS', 1_000),
      claimWaitMs: DOCKET_DEFAULTS.claimWaitMs,
    },
    lifecycle: {
      runnerCounts: ints('BENCH_LIFECYCLE_RUNNERS', [1, 4, 16]),
      runs: int('BENCH_LIFECYCLE_RUNS', 200, 32),
      dispatchConcurrency: int('BENCH_DISPATCH_CONCURRENCY', 4),
      claimWaitMs: DOCKET_DEFAULTS.claimWaitMs,
      timeoutMs: 180_000,
    },
    scale: {
      orgCounts: ints('BENCH_SCALE_ORGS', [1, 4, 16]),
      // Totals, spread over the organizations; local workerd restarts past about 60 claims at once.
      runs: int('BENCH_SCALE_RUNS', 192, 48),
      runners: int('BENCH_SCALE_RUNNERS', 16),
      dispatchConcurrency: int('BENCH_DISPATCH_CONCURRENCY', 4),
    },
    cancel: {
      samples: int('BENCH_CANCEL_SAMPLES', 30, 8),
      leaseRefreshMs: DOCKET_DEFAULTS.leaseRefreshMs,
    },
    idle: {
      runners: int('BENCH_IDLE_RUNNERS', 4),
      windowMs: int('BENCH_IDLE_WINDOW_MS', 30_000, 10_000),
      claimWaitMs: int('BENCH_IDLE_CLAIM_WAIT_MS', 2_000),
      heartbeatIntervalMs: int('BENCH_IDLE_HEARTBEAT_MS', 5_000),
      defaults: DOCKET_DEFAULTS,
    },
    autopilot: {
      readyIssues: ints('BENCH_AUTOPILOT_ISSUES', [10, 100, 1_000, 10_000], [10, 1_000]),
      warmupTicks: int('BENCH_AUTOPILOT_WARMUP_TICKS', 3),
      warmupTicksMax: int('BENCH_AUTOPILOT_WARMUP_TICKS_MAX', 25, 15),
      windowTicks: int('BENCH_AUTOPILOT_TICKS', 10, 5),
      lostWebhookTicksMax: int('BENCH_AUTOPILOT_LOST_TICKS_MAX', 10, 5),
      sharedIssues: int('BENCH_AUTOPILOT_SHARED_ISSUES', 120),
      webhookSamples: int('BENCH_AUTOPILOT_WEBHOOK_SAMPLES', 50, 15),
      burstIssues: 100,
      burstDeliveries: int('BENCH_AUTOPILOT_BURST', 1_000, 300),
      burstConcurrency: int('BENCH_AUTOPILOT_BURST_CONCURRENCY', 25),
      publications: int('BENCH_AUTOPILOT_PUBLICATIONS', 3, 1),
    },
    timeoutMs: int('BENCH_TIMEOUT_MS', 1_800_000),
    out: process.env.BENCH_OUT ?? '',
    updateDocs: /^(1|true|yes)$/i.test(process.env.BENCH_UPDATE_DOCS ?? ''),
  };
}
