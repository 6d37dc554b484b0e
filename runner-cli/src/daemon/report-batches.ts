// The report stream's bookkeeping, with no I/O: output lines and phase changes buffered in order
// and cut into bounded batches, and the seq that makes each report apply once.
import { ApiError } from '../api.js';

type ReportItem = { line: string } | { phase: string };
type ReportLimits = { maxBatchLines: number; maxLineChars: number; maxBufferedLines: number };
/** One report body as sent, kept until it is answered. */
type PendingReport = { seq: number; lines: string[]; phase?: string; final?: any };

/**
 * Buffers output lines and phase changes in order, and hands out bounded batches: a batch is at
 * most one phase change followed by lines, so the server sees every phase and every line in the
 * order the agent printed them. Pure bookkeeping.
 */
export class ReportBuffer {
  limits: ReportLimits;
  items: ReportItem[];
  dropped: number;
  /** The last phase queued. */
  phase: string | null;
  constructor(limits: ReportLimits) {
    this.limits = limits;
    this.items = [];
    this.dropped = 0;
    this.phase = null;
  }
  push(line: string) {
    const max = this.limits.maxLineChars;
    this.items.push({ line: line.length > max ? line.slice(0, max) + '…' : line });
    this.#bound();
  }
  setPhase(phase: string) {
    if (phase === this.phase) return;
    this.phase = phase;
    this.items.push({ phase });
    this.#bound();
  }
  get hasNews() {
    return this.items.length > 0 || this.dropped > 0;
  }
  get pendingLines() {
    return this.items.filter((i) => 'line' in i).length;
  }
  /**
   * Remove the next batch from the buffer. Hand it back with giveBack() if it was not delivered.
   */
  take(): { body: { lines: string[]; phase?: string }; batch: { items: Array<{ line: string }|{ phase: string }>; dropped: number } } {
    const body: { lines: string[]; phase?: string } = { lines: [] };
    let n = 0;
    const first = this.items[0];
    if (first && 'phase' in first) {
      body.phase = first.phase;
      n = 1;
    }
    while (n < this.items.length && body.lines.length < this.limits.maxBatchLines) {
      const item = this.items[n];
      if ('phase' in item) break;
      body.lines.push(item.line);
      n += 1;
    }
    const dropped = this.dropped;
    if (dropped > 0) body.lines.unshift(`[docket-runner daemon: ${dropped} output lines were dropped while the server was unreachable]`);
    this.dropped = 0;
    return { body, batch: { items: this.items.splice(0, n), dropped } };
  }
  giveBack(batch: { items: Array<{ line: string }|{ phase: string }>; dropped: number }) {
    this.items.unshift(...batch.items);
    this.dropped += batch.dropped;
    this.#bound();
  }
  /** The server has been unreachable for long: keep the newest lines, and every phase change. */
  #bound() {
    let excess = this.items.length - this.limits.maxBufferedLines;
    for (let i = 0; excess > 0 && i < this.items.length; ) {
      if ('line' in this.items[i]) {
        this.items.splice(i, 1);
        this.dropped += 1;
        excess -= 1;
      } else i += 1;
    }
  }
}

/**
 * Numbers the attempt's reports 1, 2, … and holds the one in flight: until it is answered, every
 * retry sends the same body with the same seq, so a report whose answer was lost is applied once
 * and a final report accepted before its answer was lost is answered as a success again
 * (docs/protocol.md, "Daemon reports").
 */
export class ReportSequence {
  nextSeq: number;
  pending: PendingReport | null;
  constructor() {
    this.nextSeq = 1;
    this.pending = null;
  }
  get inFlight() {
    return this.pending !== null;
  }
  /**
   * The report to send now: the one in flight, or the buffer's next batch under the next seq.
   * @param extra added to a new report only
   */
  current(buffer: ReportBuffer, extra: { final?: any } = {}): PendingReport {
    if (!this.pending) this.pending = { seq: this.nextSeq, ...buffer.take().body, ...extra };
    return this.pending;
  }
  /** The server took it: the next report gets the next seq. */
  answered() {
    this.pending = null;
    this.nextSeq += 1;
  }
  /**
   * A refusal no retry can change (a bad body, or a seq the server is already past): the report
   * is dropped so the next one can go. Returns whether it was dropped.
   */
  refused(err: unknown) {
    if (!(err instanceof ApiError)) return false;
    if (err.code === 'stale_report' && Number.isSafeInteger(err.body?.last_report_seq)) {
      this.pending = null;
      this.nextSeq = Math.max(this.nextSeq, err.body.last_report_seq) + 1;
      return true;
    }
    if (err.status === 400 || err.status === 413) {
      this.answered();
      return true;
    }
    return false;
  }
}
