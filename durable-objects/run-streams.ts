import { DocketError, errorResponse } from "../src/errors";
// Live event streams of one run, served by its RunObject as server-sent events. Each stream reads
// the run's outbox from where its client stands, so a client that resumes from sequence N (the
// Last-Event-ID header, or ?after=N) gets exactly the events after N: no gap, no duplicate. New
// events are pushed as soon as the transaction that wrote them returns; the stream ends, with an
// `end` event, once the run is terminal and every event was sent
// (../shared/spec/dispatch-lifecycle.md ends with "Agent session events — what streams back out
// while the run executes"; ../shared/spec/build-lifecycle.md, "Events and completion retry
// independently": the outbox with its per-run sequence numbers is the single source).
//
// Everything is bounded: streams per run (streamsPerRunMax), the life of one stream
// (streamMaxDurationMs, after which the client reconnects with Last-Event-ID), events per read
// (PAGE) and reads per wake-up (PUMP_ROUNDS_MAX).

import type { Config } from "../src/config";
import { logRun } from "../src/lib/log";
import type { StoredEvent } from "./outbox";

export interface StreamSource {
  /** The run's events after `seq`, in order, at most `limit`. */
  after(seq: number, limit: number): StoredEvent[];
  /** The run's state when it is terminal, else null. Read synchronously with after(). */
  endedState(): string | null;
  /** The run's attempt now, for the log lines. */
  attempt(): number;
}

/** Events read from the outbox at once. */
const PAGE = 100;
/** Outbox reads one wake-up of a stream may make before the stream is closed for a reconnect. */
const PUMP_ROUNDS_MAX = 1_000;

const encoder = new TextEncoder();

interface LiveStream {
  id: number;
  /** The last sequence number written to this stream. */
  lastSeq: number;
  openedAtMs: number;
  writer: WritableStreamDefaultWriter<Uint8Array>;
  pumping: boolean;
  /** New events arrived while the pump was writing: read again before stopping. */
  again: boolean;
  /** Writes not yet taken by the client (the pump's and keepalives). */
  pendingWrites: number;
  closed: boolean;
}

export const SSE_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
  "X-Accel-Buffering": "no",
};

/** One SSE frame per event: its sequence number is the frame id, so Last-Event-ID resumes after it. */
export function eventFrame(event: StoredEvent): string {
  // `data` is stored JSON text (one line): it is embedded as is, never parsed again.
  return `id: ${event.seq}\ndata: {"seq":${event.seq},"type":${JSON.stringify(event.type)},"at_ms":${event.at_ms},"data":${event.data}}\n\n`;
}

export class RunStreams {
  private readonly live = new Set<LiveStream>();
  private ticker: ReturnType<typeof setInterval> | null = null;
  private nextId = 1;
  private runId = "";

  constructor(
    private readonly source: StreamSource,
    private readonly config: Config,
  ) {}

  get openCount(): number {
    return this.live.size;
  }

  /**
   * Opens a stream that starts after `afterSeq`. Answers 204 when the run is terminal and nothing
   * is left to send (an EventSource stops reconnecting on 204), and null when the run already has
   * its maximum of open streams.
   */
  open(runId: string, afterSeq: number, now: number): Response | null {
    this.runId = runId;
    if (this.source.endedState() !== null && this.source.after(afterSeq, 1).length === 0) {
      return new Response(null, { status: 204 });
    }
    if (this.live.size >= this.config.streamsPerRunMax) return null;
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const stream: LiveStream = {
      id: this.nextId++,
      lastSeq: afterSeq,
      openedAtMs: now,
      writer: writable.getWriter(),
      pumping: false,
      again: false,
      pendingWrites: 0,
      closed: false,
    };
    this.live.add(stream);
    // A client that goes away errors the stream: forget it at once.
    stream.writer.closed.then(
      () => this.close(stream, "closed"),
      () => this.close(stream, "client_gone"),
    );
    this.ensureTicker();
    logRun("stream.opened", {
      run: this.runId,
      attempt: this.source.attempt(),
      seq: afterSeq,
      stream: stream.id,
      after_seq: afterSeq,
      open: this.live.size,
      reason: afterSeq > 0 ? `resumed after ${afterSeq}` : "from the start",
    });
    void this.pump(stream, `retry: ${this.config.streamRetryMs}\n\n`);
    return new Response(readable, { status: 200, headers: SSE_HEADERS });
  }

  /**
   * New events were appended. Called from inside the transaction that appends them: the reads wait
   * for a microtask, when the transaction has returned (and a rolled-back one left nothing to read).
   */
  wake(): void {
    if (this.live.size === 0) return;
    queueMicrotask(() => {
      for (const stream of this.live) void this.pump(stream);
    });
  }

  /** Keepalive for every stream, and the end of those that reached their maximum duration. */
  tick(now: number): void {
    for (const stream of [...this.live]) {
      if (now - stream.openedAtMs >= this.config.streamMaxDurationMs) {
        // No `end` event: the client reconnects with Last-Event-ID and resumes where it stood.
        this.close(stream, "max_duration");
      } else if (stream.pendingWrites === 0) {
        this.write(stream, ": keepalive\n\n").catch(() => this.close(stream, "client_gone"));
      }
    }
  }

  /** Writes the events the stream has not seen yet, then `end` once the run is terminal. */
  private async pump(stream: LiveStream, preamble?: string): Promise<void> {
    if (stream.pumping) {
      stream.again = true;
      return;
    }
    stream.pumping = true;
    try {
      if (preamble) await this.write(stream, preamble);
      for (let round = 0; round < PUMP_ROUNDS_MAX; round++) {
        if (stream.closed) return;
        stream.again = false;
        const page = this.source.after(stream.lastSeq, PAGE);
        for (const event of page) {
          if (stream.closed) return;
          await this.write(stream, eventFrame(event));
          stream.lastSeq = event.seq;
        }
        if (page.length === PAGE) continue;
        // Both reads in one synchronous step: a terminal state and its last event commit together.
        const ended = this.source.endedState();
        if (ended !== null && this.source.after(stream.lastSeq, 1).length === 0) {
          await this.write(stream, `event: end\ndata: ${JSON.stringify({ state: ended, last_seq: stream.lastSeq })}\n\n`);
          this.close(stream, "run_ended");
          return;
        }
        if (!stream.again) return;
      }
      this.close(stream, "pump_rounds");
    } catch {
      this.close(stream, "client_gone");
    } finally {
      stream.pumping = false;
    }
  }

  private async write(stream: LiveStream, text: string): Promise<void> {
    stream.pendingWrites += 1;
    try {
      await stream.writer.write(encoder.encode(text));
    } finally {
      stream.pendingWrites -= 1;
    }
  }

  private close(stream: LiveStream, reason: string): void {
    if (stream.closed) return;
    stream.closed = true;
    this.live.delete(stream);
    if (this.live.size === 0 && this.ticker !== null) {
      clearInterval(this.ticker);
      this.ticker = null;
    }
    logRun("stream.closed", { run: this.runId, attempt: this.source.attempt(), seq: stream.lastSeq, stream: stream.id, last_seq: stream.lastSeq, reason, open: this.live.size });
    if (reason === "closed" || reason === "client_gone") return;
    // A write still waiting on a slow client would hold a graceful close forever: abort instead.
    (stream.pendingWrites > 0 ? stream.writer.abort(reason) : stream.writer.close()).catch(() => {});
  }

  private ensureTicker(): void {
    if (this.ticker !== null) return;
    this.ticker = setInterval(() => this.tick(Date.now()), this.config.streamKeepaliveMs);
  }
}

// ---- the object's refusal (the request itself: src/run/event-stream.ts) -----------------------

/** The answer when a run already serves its maximum of streams. */
export function tooManyStreams(limit: number, retryMs: number): Response {
  const response = errorResponse(
    new DocketError("too_many_streams", `this run already serves ${limit} live streams; try again later`, { limit }),
  );
  response.headers.set("Retry-After", String(Math.max(1, Math.ceil(retryMs / 1_000))));
  return response;
}
