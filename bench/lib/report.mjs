// The benchmark's results as markdown tables (bench/results/*.md and docs/BENCHMARKS.md).
import { goalRows } from './goals.mjs';
import { autopilotTables } from './github-report.mjs';
import { formatted as n } from './stats.mjs';

/** @param {string[]} head @param {(string | number)[][]} rows */
function table(head, rows) {
  const line = (/** @type {(string | number)[]} */ cells) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

/**
 * The tables of one run's results, and its charts when `chartsAt` (where the SVGs are, relative to
 * the page) is given.
 * @param {any} r @param {string | null} [chartsAt]
 */
export function resultTables(r, chartsAt = null) {
  const out = [];
  const chart = (/** @type {string} */ suffix) => {
    const found = chartsAt === null ? null : (r.charts ?? []).find((/** @type {any} */ c) => c.file.endsWith(suffix));
    if (found) out.push(`\n![${found.title}](${chartsAt}${found.file})\n`);
  };
  out.push(
    `### Against the goals\n\n` +
      `Docket's performance goals, each with this run's figure, what anchors it (the floor Worker in \`bench/floor/\`, runners people already use) and whether this run met it; the sections below have the details.\n`,
  );
  out.push(table(['measure', 'this run', 'goal', 'anchor', 'met'], goalRows(r)));
  const c = r.sections.claims;
  if (c) {
    out.push(
      `\n### Claim cost against queue depth\n\n` +
        `Per successful claim, from its \`Docket-Cost\` header: mean (largest) over ${2 * c.claims_per_depth} claims per depth. ` +
        `"Queued runs" is the bulk behind the head: 3/8 in label sets the runner (labels \`${c.runner.labels.join(',')}\`, protocol \`process\`) covers, ` +
        `5/8 in sets it cannot serve; the ${2 * c.claims_per_depth} real runs the claims take are at the head. ` +
        `"Empty claim": ${c.rows[0].unservable.claims} claims (204) by a runner that can serve none of the queue ` +
        `(labels \`${c.unservable_runner.labels.join(',')}\`, protocol \`${c.unservable_runner.protocols.join(',')}\`), means. ` +
        `The floor's figures are its one statement's.\n`,
    );
    out.push(
      table(
        ['queued runs', 'D1 rows read', 'D1 rows written', 'DO requests', 'empty claim, nothing servable: rows read / written / DO', 'floor: D1 rows read', 'floor: D1 rows written', 'floor: DO requests'],
        c.rows.map((/** @type {any} */ row) => [
          row.depth.toLocaleString('en-US'),
          `${n(row.docket.cost.d1_rows_read.mean)} (${row.docket.cost.d1_rows_read.max})`,
          `${n(row.docket.cost.d1_rows_written.mean)} (${row.docket.cost.d1_rows_written.max})`,
          `${n(row.docket.cost.do_requests.mean)} (${row.docket.cost.do_requests.max})`,
          `${n(row.unservable.d1_rows_read.mean)} / ${n(row.unservable.d1_rows_written.mean)} / ${n(row.unservable.do_requests.mean)}`,
          n(row.floor.cost.d1_rows_read.mean),
          n(row.floor.cost.d1_rows_written.mean),
          n(row.floor.cost.do_requests.mean),
        ]),
      ),
    );
    out.push(
      `\n### Claims against the platform floor\n\n` +
        `The same claims against the floor Worker (one Durable Object RPC, one indexed D1 select-and-update) at the same depth. ` +
        `Latency: ${c.claims_per_depth} claims one at a time, ms at the client (p50 / p99). ` +
        `Throughput: ${c.claims_per_depth} claims by ${c.concurrency} runners at once, claims per second. ` +
        `Ratio = Docket ÷ floor (latency at p50). Runs idle: how long the runs Docket's concurrent pass took had waited since their dispatch answered, s (shortest – longest); ` +
        `local workerd closes a Durable Object about 10 s after its last call, so a run idle longer is claimed from a closed run object, which costs the claim its opening ("Whether a pass finds its run objects open").\n`,
    );
    out.push(
      table(
        ['queued runs', 'Docket latency p50 / p99', 'floor latency p50 / p99', 'latency ratio', 'Docket claims/s', 'floor claims/s', 'throughput ratio', 'runs idle, s'],
        c.rows.map((/** @type {any} */ row) => [
          row.depth.toLocaleString('en-US'),
          `${n(row.docket.latency_ms.p50)} / ${n(row.docket.latency_ms.p99)}`,
          `${n(row.floor.latency_ms.p50)} / ${n(row.floor.latency_ms.p99)}`,
          `${n(row.docket.latency_ms.p50 / row.floor.latency_ms.p50, 2)}×`,
          n(row.docket.claims_per_s, 0),
          n(row.floor.claims_per_s, 0),
          `${n(row.docket.claims_per_s / row.floor.claims_per_s, 2)}×`,
          row.docket.concurrent_idle_s ? `${n(row.docket.concurrent_idle_s.min)} – ${n(row.docket.concurrent_idle_s.max)}` : '–',
        ]),
      ),
    );
    chart('-claim-cost.svg');
    chart('-claim-throughput.svg');
  }
  const l = r.sections.latency;
  if (l) {
    out.push(
      `\n### Dispatch-to-claim latency\n\n` +
        `From just before \`POST /v1/runs\` is sent to the claim's answer at the runner, ms; ${l.long_poll_ms.n} samples each, ` +
        `both runners measured on the same dispatches. The dispatch request itself took ${n(l.dispatch_request_ms.p50)} ms (p50).\n`,
    );
    out.push(
      table(
        ['runner', 'p50', 'p99', 'mean', 'max'],
        [
          [`${l.waiting_runners} idle runners waiting on the long-poll`, n(l.long_poll_ms.p50), n(l.long_poll_ms.p99), n(l.long_poll_ms.mean), n(l.long_poll_ms.max)],
          [`1 runner polling every ${l.poll_interval_ms / 1000} s`, n(l.polling_ms.p50), n(l.polling_ms.p99), n(l.polling_ms.mean), n(l.polling_ms.max)],
        ],
      ),
    );
    chart('-dispatch-latency.svg');
  }
  const lc = r.sections.lifecycle;
  if (lc) {
    out.push(
      `\n### Lifecycle throughput\n\n` +
        `Runs from dispatch to completed (claim, launched, one phase report, the final report), ` +
        `dispatched ${lc.dispatch_concurrency} at a time; requests are every HTTP request of the dispatcher and the runners.\n`,
    );
    out.push(
      table(
        ['runners', 'runs', 'runs/s', 'HTTP requests per run', 'dispatch→completed p50 / p99 ms'],
        lc.rows.map((/** @type {any} */ row) => [
          row.runners,
          row.runs,
          n(row.runs_per_s),
          n(row.requests_per_run, 2),
          `${n(row.dispatch_to_completed_ms.p50, 0)} / ${n(row.dispatch_to_completed_ms.p99, 0)}`,
        ]),
      ),
    );
  }
  const sc = r.sections.scale;
  if (sc) {
    out.push(
      `\n### Claims across organizations\n\n` +
        `${sc.runs} runs queued and ${sc.runners} runners claiming them at once (wait_ms 0), spread evenly over the organizations ` +
        `(one scheduler object each); claims/s = grants ÷ wall time.\n`,
    );
    out.push(
      table(
        ['organizations', 'runners', 'claims', 'claims/s', 'claims/s per organization', 'D1 rows read per claim'],
        sc.rows.map((/** @type {any} */ row) => [row.orgs, row.runners, row.claims, n(row.claims_per_s), n(row.claims_per_s_per_org), n(row.d1_rows_read_per_claim)]),
      ),
    );
  }
  const k = r.sections.cancel;
  if (k) {
    out.push(
      `\n### Cancel latency\n\n` +
        `${k.samples} runs of the real \`docket-runner listen\` (process sandbox, an agent that exits on SIGTERM), each cancelled while running: ` +
        `ms from the cancel request to the runner's \`sandbox_stopped\`, and from the cancel's answer at the client (negative when the sandbox ` +
        `stopped before the answer arrived: the waiting lease call is answered as the stop is recorded). Beside it, a stop polled at the lease refresh ` +
        `(every ${k.polled.lease_refresh_ms / 1000} s): computed, uniform over the interval. Requests per cancelled run: every request ` +
        `of the runner and its daemon through a counting proxy (claims between runs included), plus the dispatch and the cancel.\n`,
    );
    out.push(
      table(
        ['stop delivered by', 'p50', 'p99', 'mean', 'max', 'HTTP requests per cancelled run'],
        [
          ['the waiting lease call, from the request (measured)', n(k.cancel_to_stopped_ms.p50), n(k.cancel_to_stopped_ms.p99), n(k.cancel_to_stopped_ms.mean), n(k.cancel_to_stopped_ms.max), n(k.requests_per_cancelled_run, 2)],
          ...(k.answer_to_stopped_ms
            ? [['the waiting lease call, from the answer (measured)', n(k.answer_to_stopped_ms.p50), n(k.answer_to_stopped_ms.p99), n(k.answer_to_stopped_ms.mean), n(k.answer_to_stopped_ms.max), '']]
            : []),
          [`the next lease refresh (computed)`, n(k.polled.mean_ms), n(k.polled.max_ms * 0.99), n(k.polled.mean_ms), n(k.polled.max_ms), '–'],
          ...(k.docker?.cancel_to_stopped_ms
            ? [[`the waiting lease call, docker launcher: container stopped and removed (measured, ${k.docker.samples} runs)`, n(k.docker.cancel_to_stopped_ms.p50), n(k.docker.cancel_to_stopped_ms.p99), n(k.docker.cancel_to_stopped_ms.mean), n(k.docker.cancel_to_stopped_ms.max), n(k.docker.requests_per_cancelled_run, 2)]]
            : []),
          ...(k.e2b?.cancel_to_stopped_ms
            ? [[`the waiting lease call, e2b launcher: sandbox killed (measured against a local E2B stand-in, ${k.e2b.samples} runs)`, n(k.e2b.cancel_to_stopped_ms.p50), n(k.e2b.cancel_to_stopped_ms.p99), n(k.e2b.cancel_to_stopped_ms.mean), n(k.e2b.cancel_to_stopped_ms.max), n(k.e2b.requests_per_cancelled_run, 2)]]
            : []),
        ],
      ),
    );
    chart('-cancel-latency.svg');
  }
  const i = r.sections.idle;
  if (i) {
    out.push(
      `\n### Idle cost\n\n` +
        `${i.runners} real \`docket-runner listen\` processes with nothing to do, counted for ${i.window_ms / 1000} s through a proxy. ` +
        `An idle runner's claim is its heartbeat; per idle runner and minute: expected = 60,000 / claim_wait_ms.\n`,
    );
    out.push(
      table(
        ['per idle runner', 'claims/min', 'heartbeats/min', 'requests/min', 'expected requests/min', 'D1 rows read/min', 'D1 rows written/min'],
        [
          [
            `measured: claim_wait_ms ${i.claim_wait_ms}, heartbeat ${i.heartbeat_interval_ms} ms`,
            n(i.claims_per_min),
            n(i.heartbeats_per_min),
            n(i.requests_per_min),
            n(i.expected_per_min),
            n(i.d1_rows_read_per_min),
            n(i.d1_rows_written_per_min),
          ],
          [
            `defaults: claim_wait_ms ${i.defaults.claim_wait_ms}, heartbeat ${i.defaults.heartbeat_interval_ms} ms`,
            n(i.defaults.claims_per_min ?? 60_000 / i.defaults.claim_wait_ms, 2),
            n(i.defaults.heartbeats_per_min ?? 60_000 / i.defaults.heartbeat_interval_ms, 2),
            `${n(i.defaults.scaled_from_measured, 2)} (measured, scaled)`,
            n(i.defaults.requests_per_min, 2),
            n(i.defaults.d1_rows_read_per_min),
            n(i.defaults.d1_rows_written_per_min),
          ],
        ],
      ),
    );
    out.push(
      `\nAn idle claim (204) cost ${n(i.idle_claim_cost.d1_rows_read)} D1 rows read and ${n(i.idle_claim_cost.d1_rows_written)} written; ` +
        `a heartbeat ${n(i.heartbeat_cost.d1_rows_read)} read and ${n(i.heartbeat_cost.d1_rows_written)} written (means from \`Docket-Cost\`).`,
    );
    if (i.rss_mb) {
      out.push(
        `\nMemory of an idle \`listen\` process (VmRSS at the end of the window, ${i.rss_mb.n} processes): ` +
          `mean ${n(i.rss_mb.mean)} MB, largest ${n(i.rss_mb.max)} MB.`,
      );
    }
  }
  out.push(...autopilotTables(r.sections.autopilot, table, chart));
  return out.join('\n');
}

/** Where the local Workers kept their state; runs before it was recorded kept it on disk. @param {{ dir: string, in_memory: boolean } | undefined} state */
const stateLine = (state) => (state === undefined ? 'local state on disk' : state.in_memory ? `local state in memory (${state.dir})` : `local state on disk (${state.dir})`);

/** When, where and on what a run was made, in one line. @param {any} r */
export function runLine(r) {
  return (
    `${r.finished_at} · ${r.quick ? 'quick run (BENCH_QUICK=1)' : 'full run'} · ${r.duration_s.toFixed(0)} s · ` +
    `${r.machine.cpus}× ${r.machine.cpu_model} (load ${n(r.machine.load_average_1min.at_start, 2)} at start, ${n(r.machine.load_average_1min.at_end, 2)} at end) · ` +
    `${stateLine(r.machine.local_state)} · Node ${r.machine.node} · wrangler ${r.machine.wrangler} · ` +
    `Docket ${r.git.commit}${r.git.source === 'head' ? ' (as committed)' : r.git.dirty ? ' (with uncommitted changes)' : ''}`
  );
}

/** The whole results page. @param {any} r */
export function resultsPage(r) {
  return [
    `# Docket benchmark results`,
    '',
    runLine(r),
    '',
    'Local Workers on 127.0.0.1 (wrangler unstable_startWorker: local D1, Durable Objects and Queues); method in docs/BENCHMARKS.md.',
    '',
    resultTables(r, './'),
    '',
  ].join('\n');
}
