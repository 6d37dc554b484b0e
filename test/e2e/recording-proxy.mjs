// A recording HTTP proxy on loopback: put between a client (the runner CLI) and a local Docket, it
// forwards every call unchanged and keeps each exchange (request and answer, bodies as text) so a
// test can check them against the OpenAPI document (test/e2e/openapi-check.mjs), and each call as
// it arrives, so a test can tell a long-poll is waiting.
import { createServer } from 'node:http';

/** Headers that describe one hop, not the message: not forwarded. */
const HOP_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'content-encoding']);

/**
 * @typedef {{ method: string, path: string, requestBody: string, requestType: string | null,
 *   status: number, responseBody: string, responseType: string | null, atMs: number }} Exchange
 */

/** Bounded read of a request body (the Worker caps bodies far below this). @param {import('node:http').IncomingMessage} req */
async function readBody(req, maxBytes = 16 * 1024 * 1024) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > maxBytes) throw new Error(`request body over ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Start a proxy to `target` (a base URL such as http://127.0.0.1:8787); answers are buffered whole,
 * so it suits JSON calls and long-polls, not live streams.
 * @param {string} target
 */
export async function startRecordingProxy(target) {
  /** @type {Exchange[]} */
  const exchanges = [];
  /** Every call as it arrives, before its answer (a long-poll is here while it waits). @type {{ method: string, path: string, atMs: number }[]} */
  const started = [];
  const server = createServer(async (req, res) => {
    started.push({ method: String(req.method), path: String(req.url), atMs: Date.now() });
    try {
      const requestBody = await readBody(req);
      /** @type {Record<string, string>} */
      const headers = {};
      for (const [k, v] of Object.entries(req.headers)) if (!HOP_HEADERS.has(k) && typeof v === 'string') headers[k] = v;
      const upstream = await fetch(target + req.url, {
        method: req.method,
        headers,
        body: requestBody && req.method !== 'GET' && req.method !== 'HEAD' ? requestBody : undefined,
        signal: AbortSignal.timeout(120_000),
      });
      const responseBody = await upstream.text();
      exchanges.push({
        method: String(req.method),
        path: String(req.url),
        requestBody,
        requestType: req.headers['content-type'] ?? null,
        status: upstream.status,
        responseBody,
        responseType: upstream.headers.get('content-type'),
        atMs: Date.now(),
      });
      /** @type {Record<string, string>} */
      const out = {};
      upstream.headers.forEach((v, k) => {
        if (!HOP_HEADERS.has(k)) out[k] = v;
      });
      out['content-length'] = String(Buffer.byteLength(responseBody));
      res.writeHead(upstream.status, out).end(responseBody);
    } catch (e) {
      // The client sees a broken proxy as a network failure, as it would a broken server.
      res.destroy(e instanceof Error ? e : new Error(String(e)));
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    exchanges,
    started,
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}
