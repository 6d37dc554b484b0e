// Scale across organizations (docs/BENCHMARKS.md, "Scale: organizations claiming at once"): claims
// per second with 1, 4 and 16 organizations claiming at the same time, one scheduler object each.
// The same `runs` and `runners` in every measurement, spread evenly over its organizations (so
// only the number of schedulers changes); then every runner claims (wait_ms 0) until its
// organization's queue is empty. Claims per second = grants ÷ wall time.
import { claim, createOrg, dispatch, parseCost, registerMachines } from './lib/docket.mjs';
import { client, pool } from './lib/http.mjs';
import { RUNNER_LABELS } from './lib/seed.mjs';
import { round, summarize } from './lib/stats.mjs';

/**
 * @param {string} url a running Docket
 * @param {{ orgCounts: number[], runs: number, runners: number, dispatchConcurrency: number }} cfg
 * @param {(line: string) => void} say
 */
export async function scale(url, cfg, say) {
  const rows = [];
  for (const orgs of cfg.orgCounts) {
    const runsPerOrg = Math.max(1, Math.floor(cfg.runs / orgs));
    const runnersPerOrg = Math.max(1, Math.floor(cfg.runners / orgs));
    const setup = client(url);
    const members = [];
    for (let o = 0; o < orgs; o++) {
      const org = await createOrg(setup, `bench-scale-${orgs}-${o}`);
      members.push({ ...org, machines: await registerMachines(setup, org.admin, runnersPerOrg, RUNNER_LABELS) });
    }
    const total = orgs * runsPerOrg;
    await pool(total, cfg.dispatchConcurrency, (i) => dispatch(setup, members[i % orgs].admin));
    say(`  ${orgs} organization${orgs === 1 ? '' : 's'}: ${total} runs queued, ${orgs * runnersPerOrg} runners claiming`);

    const api = client(url);
    /** @type {number[]} */
    const rowsRead = [];
    let granted = 0;
    // Each runner claims until an empty answer; bounded by its organization's runs (plus that answer).
    const runner = async (/** @type {string} */ token) => {
      for (let i = 0; i <= runsPerOrg; i++) {
        const res = await claim(api, token, 0);
        if (res.status !== 200) return;
        granted += 1;
        const cost = parseCost(res.headers);
        if (cost) rowsRead.push(cost.d1_rows_read);
      }
    };
    const t0 = performance.now();
    await Promise.all(members.flatMap((m) => m.machines.map((machine) => runner(machine.token))));
    const seconds = (performance.now() - t0) / 1000;
    if (granted !== total) throw new Error(`scale: ${granted} grants for ${total} queued runs with ${orgs} organizations`);
    const row = {
      orgs,
      runners: orgs * runnersPerOrg,
      claims: granted,
      claims_per_s: round(granted / seconds),
      claims_per_s_per_org: round(granted / seconds / orgs),
      d1_rows_read_per_claim: round(summarize(rowsRead).mean),
    };
    say(`    ${row.claims_per_s} claims/s (${row.claims_per_s_per_org} per organization), ${row.d1_rows_read_per_claim} D1 rows read per claim`);
    rows.push(row);
  }
  return { runs: cfg.runs, runners: cfg.runners, rows };
}
