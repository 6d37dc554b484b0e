// A counting proxy on 127.0.0.1 in front of the GitHub stand-in (test/fake-github/server.mjs): Docket's
// projects are pointed at it, it forwards every call unchanged and records what GitHub would count
// against the installation's hourly limit. GitHub counts every REST request it answers, the
// installation-token mint included, except a conditional request answered 304 Not Modified
// (GitHub's REST docs, "Rate limits for the REST API" and "Best practices for using the REST API").
import { Agent, createServer, request } from 'node:http';

/** The kind of GitHub call a path is, for the breakdowns of the results. @param {string} method @param {string} path */
export function callKind(method, path) {
  if (path.endsWith('/access_tokens')) return 'token';
  const rest = /^\/repos\/[^/]+\/[^/]+(\/.*)?$/.exec(path)?.[1] ?? null;
  if (rest === null) return 'other';
  if (rest === '/issues') return 'ready_list';
  if (/^\/issues\/\d+$/.test(rest)) return 'issue';
  if (/^\/issues\/\d+\/dependencies\/blocked_by$/.test(rest)) return 'blockers';
  if (/^\/issues\/\d+\/events$/.test(rest)) return 'events';
  if (/^\/issues\/\d+\/comments$/.test(rest)) return method === 'GET' ? 'comments_read' : 'comment';
  if (/^\/issues\/\d+\/labels/.test(rest)) return 'labels';
  if (rest.startsWith('/pulls')) return method === 'GET' ? 'pull_lookup' : 'pull_create';
  return 'repository';
}

/**
 * @typedef {{ atMs: number, method: string, path: string, kind: string, status: number, counted: boolean,
 *   pushToken: boolean }} GitHubCall
 */

/**
 * Starts the proxy in front of `target` (the stand-in's base URL). Every answered call is kept in
 * `calls`, oldest first; `mark()` and `since(mark)` cut a window out of them.
 * @param {string} target
 */
export async function startGitHubCounter(target) {
  const upstream = new URL(target);
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  /** @type {GitHubCall[]} */
  const calls = [];
  const server = createServer((req, res) => {
    const chunks = /** @type {Buffer[]} */ ([]);
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const path = (req.url ?? '').split('?')[0];
      const up = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent }, (upRes) => {
        const status = upRes.statusCode ?? 502;
        calls.push({
          atMs: Date.now(),
          method: String(req.method),
          path,
          kind: callKind(String(req.method), path),
          status,
          counted: status !== 304,
          // A token narrowed to repositories is a run's push credential (docs/autopilot.md, "Publication").
          pushToken: path.endsWith('/access_tokens') && body.includes('"repositories"'),
        });
        res.writeHead(status, upRes.headers);
        upRes.pipe(res);
      });
      up.on('error', () => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      });
      up.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    calls,
    /** A point in the record, for `since`. */
    mark: () => calls.length,
    /** The calls answered after `mark`. @param {number} mark */
    since: (mark) => calls.slice(mark),
    stop: () => {
      server.closeAllConnections();
      agent.destroy();
      return new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}

/**
 * What a window of calls cost: the calls GitHub counts, those answered 304, and the counted ones by kind.
 * @param {GitHubCall[]} calls
 */
export function tally(calls) {
  /** @type {Record<string, number>} */
  const byKind = {};
  let counted = 0;
  let notModified = 0;
  for (const c of calls) {
    if (!c.counted) {
      notModified += 1;
      continue;
    }
    counted += 1;
    byKind[c.kind] = (byKind[c.kind] ?? 0) + 1;
  }
  return { counted, not_modified: notModified, by_kind: byKind };
}
