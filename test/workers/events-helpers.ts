// Helpers for the tests of events, live streams and completion callbacks: a server-sent events
// reader, a run driven to its end through the runner protocol, a receiver's signature check, and
// bounded waits for work the Queue does in the background.

import { env, exports } from "cloudflare:workers";
import { ADMIN_SECRET, attemptCall, call, claim, registerRunner, report, sleep } from "./helpers";

type Json = Record<string, any>;

export async function createOrgWithSecret(name = "acme") {
  const res = await call("POST", "/v1/orgs", { token: ADMIN_SECRET, body: { name } });
  if (res.status !== 201) throw new Error(`create org: ${res.status} ${JSON.stringify(res.body)}`);
  return { orgId: res.body.org.id as string, admin: res.body.token.token as string, secret: res.body.org.callback_secret as string };
}

/** Claims, launches and finishes the run as a runner and its daemon would; answers the final report. */
export async function finishRun(admin: string, runId: string, outcome: "completed" | "failed" = "completed") {
  const runner = await registerRunner(admin);
  const claimed = await claim(runner.token, 0);
  if (claimed.status !== 200 || claimed.body.run_id !== runId) throw new Error(`claim: ${claimed.status} ${JSON.stringify(claimed.body)}`);
  await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
  await report(claimed.body.attempt_token, runId, { phase: "implementing", lines: ["working"] });
  const final = await report(claimed.body.attempt_token, runId, {
    final:
      outcome === "completed"
        ? { outcome, exit_codes: { agent: 0 }, artifact: { patch: "diff --git a/x b/x\n", source_revision: "abc1234" }, cost_cents: 7 }
        : { outcome, error: "tests failed", exit_codes: { agent: 1 } },
  });
  if (final.status !== 200) throw new Error(`final report: ${final.status} ${JSON.stringify(final.body)}`);
  return { runner, attemptToken: claimed.body.attempt_token as string };
}

export async function allEvents(token: string, runId: string): Promise<Json[]> {
  const res = await call("GET", `/v1/runs/${runId}/events?limit=1000`, { token });
  if (res.status !== 200) throw new Error(`events: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.events;
}

/** Polls `probe` until it returns something other than undefined; bounded by `limitMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, limitMs = 20_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(100);
  }
}

export async function storedSeqs(runId: string): Promise<number[]> {
  const rows = await env.DB.prepare("SELECT seq FROM events WHERE run_id = ? ORDER BY seq").bind(runId).all<{ seq: number }>();
  return rows.results.map((r) => r.seq);
}

// ---- server-sent events --------------------------------------------------------------------------

export interface Frame {
  id: string | null;
  event: string;
  data: string;
}

export class SseReader {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  private finished = false;

  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  /** The next frame with data (comments and the retry field are skipped), or null at the end. */
  async next(): Promise<Frame | null> {
    for (let reads = 0; reads < 10_000; reads++) {
      const frame = this.takeFrame();
      if (frame) return frame;
      if (this.finished) return null;
      try {
        const { done, value } = await this.reader.read();
        if (done) this.finished = true;
        else this.buffer += this.decoder.decode(value, { stream: true });
      } catch {
        // An aborted stream ends like a dropped connection.
        this.finished = true;
      }
    }
    throw new Error("stream never produced a frame");
  }

  /** Frames until the server closes the stream. */
  async rest(): Promise<Frame[]> {
    const frames: Frame[] = [];
    for (let f = await this.next(); f; f = await this.next()) frames.push(f);
    return frames;
  }

  /** Frames up to and including the event with sequence number `seq`. */
  async until(seq: number): Promise<Frame[]> {
    const frames: Frame[] = [];
    for (let f = await this.next(); f; f = await this.next()) {
      frames.push(f);
      if (f.id !== null && Number(f.id) >= seq) return frames;
    }
    throw new Error(`the stream ended before event ${seq}`);
  }

  async cancel(): Promise<void> {
    await this.reader.cancel().catch(() => {});
  }

  private takeFrame(): Frame | null {
    for (let guard = 0; guard < 1_000; guard++) {
      const end = this.buffer.indexOf("\n\n");
      if (end < 0) return null;
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const frame: Frame = { id: null, event: "message", data: "" };
      let hasData = false;
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") frame.id = value;
        else if (field === "event") frame.event = value;
        else if (field === "data") {
          frame.data += (hasData ? "\n" : "") + value;
          hasData = true;
        }
      }
      if (hasData) return frame;
    }
    return null;
  }
}

export async function openStream(token: string | null, runId: string, opts: { after?: number | string; lastEventId?: string } = {}) {
  const headers: Record<string, string> = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (opts.lastEventId !== undefined) headers["Last-Event-ID"] = opts.lastEventId;
  const query = opts.after === undefined ? "" : `?after=${opts.after}`;
  const res = await exports.default.fetch(new Request(`http://docket.test/v1/runs/${runId}/events/stream${query}`, { headers }));
  if (res.status !== 200 || !res.body) {
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null, sse: null };
  }
  return { status: res.status, headers: res.headers, body: null, sse: new SseReader(res.body.getReader()) };
}

/** The sequence numbers of a list of event frames. */
export const seqsOf = (frames: Frame[]) => frames.filter((f) => f.event === "message").map((f) => Number(f.id));

// ---- completion callbacks ---------------------------------------------------------------------

/** The timestamp and every `v1` signature of a Docket-Signature header (two during a secret rotation). */
export function signaturesOf(header: string): { t: string | undefined; v1: string[] } {
  const pairs = header.split(",").map((p) => p.split("=", 2) as [string, string]);
  return { t: pairs.find(([k]) => k === "t")?.[1], v1: pairs.filter(([k]) => k === "v1").map(([, v]) => v) };
}

/** HMAC-SHA256 of `<t>.<raw body>` with `secret`, in lowercase hex. */
export async function signWith(secret: string, t: string, rawBody: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${t}.${rawBody}`));
  return [...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Verifies a Docket-Signature header as docs/callbacks.md tells a receiver to: any `v1` may match. */
export async function verifySignature(secret: string, header: string, rawBody: string): Promise<boolean> {
  const { t, v1 } = signaturesOf(header);
  if (!t || v1.length === 0) return false;
  return v1.includes(await signWith(secret, t, rawBody));
}

export interface Received {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * Stubs the global fetch for one receiver URL only (the Worker runs in this isolate): every other
 * request goes to the real fetch. `answer` decides each reply by its index (0 for the first call).
 */
export function stubReceiver(url: string, answer: (n: number) => Response | Promise<Response>) {
  const original = globalThis.fetch;
  const received: Received[] = [];
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (request.url !== url) return original(input, init);
    const body = await request.text();
    received.push({ url: request.url, headers: Object.fromEntries(request.headers), body });
    return answer(received.length - 1);
  }) as typeof fetch;
  return { received, restore: () => void (globalThis.fetch = original) };
}

/** The structured log lines (src/lib/log.ts) printed while `spy` watched console.log. */
export function logLines(calls: unknown[][], msg: string): Json[] {
  const lines: Json[] = [];
  for (const args of calls) {
    const text = args[0];
    if (typeof text !== "string" || !text.startsWith("{\"msg\"")) continue;
    const line = JSON.parse(text);
    if (line.msg === msg) lines.push(line);
  }
  return lines;
}
