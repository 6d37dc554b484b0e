// A scripted stand-in for the Docket API, for tests of answers the real server cannot be made to
// give on demand (503s, a lost final report). Each request is recorded; `answer` decides the reply.
import { createServer } from 'node:http';

/**
 * @param {(req: { method: string, path: string, body: any, auth: string | undefined }) => { status: number, body?: any, headers?: Record<string, string> } | Promise<{ status: number, body?: any, headers?: Record<string, string> }>} answer
 */
export async function fakeServer(answer) {
  /** @type {Array<{ method: string, path: string, body: any, auth: string | undefined, at_ms: number }>} */
  const requests = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', async () => {
      const entry = { method: req.method ?? '', path: req.url ?? '', body: text ? JSON.parse(text) : null, auth: req.headers.authorization, at_ms: Date.now() };
      requests.push(entry);
      const a = await answer(entry);
      if (a.status === 0) {
        res.socket?.destroy(); // a network failure
        return;
      }
      res.writeHead(a.status, { 'content-type': 'application/json', ...(a.headers ?? {}) });
      res.end(a.body === undefined ? '' : JSON.stringify(a.body));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const addr = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${addr.port}`,
    requests,
    close: () => new Promise((r) => server.close(() => r(undefined))),
  };
}
