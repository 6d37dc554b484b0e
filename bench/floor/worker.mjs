// The platform floor: `POST /claim {org_id, labels_key, machine_id}` makes one Durable Object RPC
// (one object per organization, as Docket's scheduler), and the object makes one indexed D1
// statement that selects the head of the queue and marks it claimed. 200 {id} or 204; the D1 rows
// it read and wrote come back in `Floor-Cost`, in the format of Docket-Cost.
import { DurableObject } from 'cloudflare:workers';

const CLAIM_SQL = `UPDATE queue SET state = 'claimed', machine_id = ?1
  WHERE id = (SELECT id FROM queue WHERE org_id = ?2 AND labels_key = ?3 AND state = 'queued'
              ORDER BY order_group, order_priority, queued_at_ms, id LIMIT 1)
  RETURNING id`;

export class FloorClaimer extends DurableObject {
  /** @param {string} orgId @param {string} labelsKey @param {string} machineId */
  async claim(orgId, labelsKey, machineId) {
    const result = await this.env.DB.prepare(CLAIM_SQL).bind(machineId, orgId, labelsKey).all();
    return { id: result.results[0]?.id ?? null, rowsRead: result.meta.rows_read, rowsWritten: result.meta.rows_written };
  }
}

export default {
  /** @param {Request} request @param {any} env */
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (pathname === '/healthz') return Response.json({ ok: true });
    if (request.method !== 'POST' || pathname !== '/claim') return new Response(null, { status: 404 });
    const body = await request.json();
    const claimer = env.CLAIMER.get(env.CLAIMER.idFromName(body.org_id));
    const answer = await claimer.claim(body.org_id, body.labels_key, body.machine_id);
    const cost = `d1_rows_read=${answer.rowsRead}, d1_rows_written=${answer.rowsWritten}, do_requests=1`;
    if (!answer.id) return new Response(null, { status: 204, headers: { 'Floor-Cost': cost } });
    return Response.json({ id: answer.id }, { headers: { 'Floor-Cost': cost } });
  },
};
