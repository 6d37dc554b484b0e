// The Worker's own fetch handler, called in this isolate with a real Request: the same app, routes,
// auth and validation as `exports.default.fetch`. Suites that make thousands of calls use it because
// the test pool (@cloudflare/vitest-pool-workers 0.15.1) wraps the entrypoint's prototype in one
// more Proxy for every request it serves: each call is slower than the last, and a few thousand
// calls in one file overflow the stack (cloudflare/workers-sdk#15092, fixed in later releases).

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import worker from "../../src/index";

type Json = Record<string, any>;

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: Json;
}

export async function send(request: Request): Promise<Answer> {
  const ctx = createExecutionContext();
  const res = await worker.fetch(request, env, ctx);
  await waitOnExecutionContext(ctx);
  const text = await res.text();
  let body: Json = {};
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = { unparsed: text };
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** Like helpers.call, through the fetch handler directly. */
export async function callDirect(
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) headers["Content-Type"] = "application/json";
  const res = await send(new Request(`http://docket.test${path}`, { method, headers, body }));
  return { status: res.status, body: res.body };
}
