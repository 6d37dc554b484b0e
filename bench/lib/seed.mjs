// Bulk seeding of queue rows straight into a stopped Worker's local D1, in batches of one
// statement each (a recursive CTE makes the rows inside SQLite), so 100,000 rows take seconds.
// Bulk rows are queued runs behind the head: a claim must not read them, whatever their number.

/** The runner of the claim benchmark: labels linux, protocol process. */
export const RUNNER_LABELS = ['linux'];

/**
 * Where bulk rows go, by row number modulo 8: three of eight to label sets the runner covers
 * (behind the head: priority 0–9, below the head's 1000), five of eight to sets it cannot serve
 * (a label it lacks, or the docker protocol it does not offer).
 */
export const BULK_SETS = [
  'process|linux',
  'process|linux',
  'process|',
  'process|gpu,linux',
  'process|gpu,linux',
  'process|macos',
  'docker|linux',
  'process|windows',
];

/** Head rows (the floor's only; Docket's head runs are dispatched through its API). */
export const HEAD_SET = 'process|linux';
export const HEAD_PRIORITY = 1000;

// ?1..?2 row numbers, ?3 org, ?4 base time, ?5..?12 BULK_SETS.
const BULK_KEY = `CASE i % 8 WHEN 0 THEN ?5 WHEN 1 THEN ?6 WHEN 2 THEN ?7 WHEN 3 THEN ?8
  WHEN 4 THEN ?9 WHEN 5 THEN ?10 WHEN 6 THEN ?11 ELSE ?12 END`;

const DOCKET_BULK_SQL = `INSERT INTO runs (id, org_id, state, attempt, version, labels_key, protocol, order_group,
    order_priority, queued_at_ms, not_before_ms, created_at_ms, updated_at_ms)
  WITH RECURSIVE seq(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?2),
    bulk(i, k) AS (SELECT i, ${BULK_KEY} FROM seq)
  SELECT printf('run_b%023x', i), ?3, 'queued', 0, 1, k, substr(k, 1, instr(k, '|') - 1), 1,
    -(i % 10), ?4 + i, ?4 + i, ?4 + i, ?4 + i
  FROM bulk`;

const FLOOR_BULK_SQL = `INSERT INTO queue (id, org_id, labels_key, state, order_group, order_priority, queued_at_ms)
  WITH RECURSIVE seq(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?2),
    bulk(i, k) AS (SELECT i, ${BULK_KEY} FROM seq)
  SELECT printf('b%023x', i), ?3, k, 'queued', 1, -(i % 10), ?4 + i FROM bulk`;

const FLOOR_HEAD_SQL = `INSERT INTO queue (id, org_id, labels_key, state, order_group, order_priority, queued_at_ms)
  WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1)
  SELECT printf('h%s-%06d', ?2, i), ?3, ?4, 'queued', 1, ?5, ?6 + i FROM seq`;

/**
 * Adds bulk rows numbered from+1..to, in batches, reporting progress.
 * @param {D1Database} db @param {'docket' | 'floor'} kind
 * @param {{ orgId: string, from: number, to: number, batch: number, onProgress?: (done: number) => void }} o
 */
export async function seedBulk(db, kind, { orgId, from, to, batch, onProgress }) {
  const baseMs = Date.now() - 3_600_000; // older than the head: the head is first by priority alone
  if (kind === 'docket') {
    for (const key of new Set(BULK_SETS)) {
      await db.prepare('INSERT INTO label_sets (org_id, labels_key, created_at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').bind(orgId, key, baseMs).run();
    }
  }
  const sql = kind === 'docket' ? DOCKET_BULK_SQL : FLOOR_BULK_SQL;
  for (let start = from + 1; start <= to; start += batch) {
    const end = Math.min(to, start + batch - 1);
    await db.prepare(sql).bind(start, end, orgId, baseMs, ...BULK_SETS).run();
    onProgress?.(end);
  }
}

/**
 * The floor's head: `count` rows at the head of HEAD_SET, named after `round`.
 * @param {D1Database} db @param {{ orgId: string, round: string, count: number }} o
 */
export async function seedFloorHead(db, { orgId, round, count }) {
  await db.prepare(FLOOR_HEAD_SQL).bind(count, round, orgId, HEAD_SET, -HEAD_PRIORITY, Date.now()).run();
}

/**
 * Queued rows of an organization, as the Worker will see them.
 * @param {D1Database} db @param {'docket' | 'floor'} kind @param {string} orgId
 */
export async function countQueued(db, kind, orgId) {
  const sql = kind === 'docket' ? "SELECT COUNT(*) AS n FROM runs WHERE org_id = ? AND state = 'queued'" : "SELECT COUNT(*) AS n FROM queue WHERE org_id = ? AND state = 'queued'";
  const row = await db.prepare(sql).bind(orgId).first();
  return Number(row?.n ?? 0);
}
