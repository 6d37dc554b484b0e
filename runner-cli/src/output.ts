// What the runner prints: readable lines for a person, or one JSON object per line with --json.
// Every line names its event; run lines carry the run, attempt, phase and elapsed time.

export function formatDuration(ms: number) {
  if (!Number.isFinite(ms) || ms < 0) return '-';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** A wait before a retry: tenths of a second below 10 s ("0.4 s"), whole seconds above ("45 s"). */
export function formatWait(ms: number) {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

export class Output {
  now: () => number;
  stream: NodeJS.WritableStream;
  json: boolean;
  constructor({ json = false, stream = process.stdout, now = Date.now }: { json?: boolean; stream?: NodeJS.WritableStream; now?: () => number } = {}) {
    this.json = json;
    this.stream = stream;
    this.now = now;
  }

  /**
   * @param event a stable name, e.g. `claimed`, `phase`, `run_ended`
   * @param text the readable line (without time)
   * @param fields data for --json
   */
  emit(event: string, text: string, fields: Record<string, any> = {}) {
    const at = this.now();
    if (this.json) {
      this.stream.write(JSON.stringify({ at_ms: at, event, ...fields, message: text }) + '\n');
    } else {
      const time = new Date(at).toISOString().slice(11, 19);
      this.stream.write(`${time} ${text}\n`);
    }
  }

  /**
   * A line about one run.
   */
  run(event: string, job: { run_id: string; attempt: number; phase?: string | null; started_at_ms?: number | null }, text: string, fields: Record<string, any> = {}) {
    const elapsedMs = job.started_at_ms ? this.now() - job.started_at_ms : null;
    const where = `${job.run_id}#${job.attempt}`;
    const phase = job.phase ? ` [${job.phase}]` : '';
    const elapsed = elapsedMs !== null ? ` (${formatDuration(elapsedMs)})` : '';
    this.emit(event, `${where}${phase} ${text}${elapsed}`, {
      run_id: job.run_id,
      attempt: job.attempt,
      phase: job.phase ?? null,
      elapsed_ms: elapsedMs,
      ...fields,
    });
  }
}
