// The runner's HTTP transport: the little of fetch its JSON calls use, over node:http and
// node:https. Node's global fetch loads undici, about 9 MB more of an idle `listen` process's memory
// (docs/BENCHMARKS.md, "Idle runner memory").
import { request as httpRequest, type IncomingMessage } from 'node:http';

/** The largest answer body read; Docket's answers are far smaller. */
export const ANSWER_MAX_BYTES = 16 * 1024 * 1024;

export type FetchInit = { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal };
export type FetchAnswer = { status: number; headers: { get(name: string): string | null }; text(): Promise<string> };
export type FetchLike = (url: string, init: FetchInit) => Promise<FetchAnswer>;

/** One request; the answer's body is read in full (up to ANSWER_MAX_BYTES) by text(). */
export const httpFetch: FetchLike = async (url, init) => {
  const target = new URL(url);
  // TLS is loaded only for an https server, which a local or plain-HTTP runner does not need.
  const send = target.protocol === 'https:' ? (await import('node:https')).request : httpRequest;
  return new Promise((resolve, reject) => {
    const headers = init.body === undefined ? init.headers : { ...init.headers, 'content-length': String(Buffer.byteLength(init.body)) };
    const req = send(target, { method: init.method, headers, signal: init.signal }, (res) => {
      const body = readBody(res);
      body.catch(() => {}); // the caller sees the failure when it reads the body
      resolve({ status: res.statusCode ?? 0, headers: { get: (name) => headerValue(res, name) }, text: () => body });
    });
    req.on('error', reject);
    req.end(init.body);
  });
};

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > ANSWER_MAX_BYTES) res.destroy(new Error(`the answer is over ${ANSWER_MAX_BYTES} bytes`));
      else chunks.push(chunk);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('the connection closed before the answer ended')));
  });
}

function headerValue(res: IncomingMessage, name: string): string | null {
  const value = res.headers[name.toLowerCase()];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}
