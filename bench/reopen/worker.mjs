// What opening a Durable Object costs the local runtime, apart from what the object does
// (bench/reopen.mjs): one SQLite object per run, addressed by name as Docket's run objects are.
// `POST /create?id=` writes its one row; `POST /claim?id=` is a compare-and-swap on it, 200 {claimed}.
import { DurableObject } from 'cloudflare:workers';

export class TrivialRun extends DurableObject {
  /** @param {DurableObjectState} ctx @param {any} env */
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec('CREATE TABLE IF NOT EXISTS run (id TEXT PRIMARY KEY, state TEXT NOT NULL, attempt INTEGER NOT NULL)');
  }

  /** @param {string} id */
  async create(id) {
    this.ctx.storage.sql.exec("INSERT OR IGNORE INTO run (id, state, attempt) VALUES (?, 'queued', 0)", id);
  }

  /** @param {string} id */
  async claim(id) {
    const won = this.ctx.storage.sql.exec("UPDATE run SET state = 'claimed', attempt = attempt + 1 WHERE id = ? AND state = 'queued' RETURNING attempt", id).toArray();
    return won.length === 1;
  }
}

export default {
  /** @param {Request} request @param {any} env */
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/healthz') return Response.json({ ok: true });
    const id = url.searchParams.get('id');
    if (request.method !== 'POST' || !id) return new Response(null, { status: 404 });
    const run = env.RUN.get(env.RUN.idFromName(id));
    if (url.pathname === '/create') return Response.json({ created: (await run.create(id), true) });
    if (url.pathname === '/claim') return Response.json({ claimed: await run.claim(id) });
    return new Response(null, { status: 404 });
  },
};
