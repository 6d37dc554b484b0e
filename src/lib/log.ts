// One structured JSON line per event, for `wrangler tail` and log search. Every line says why it
// was written (`reason`); every line about one run is written by logRun(), so the type check holds
// each of them to the same fields (README.md, "Deploying", lists the lines).

/** The fields of a line that is not about one run: ledger sweeps, HTTP errors, cron ticks. */
export interface LogFields {
  reason: string;
  /** A line about one run goes through logRun(), which requires its attempt. */
  run?: never;
  attempt?: never;
  [field: string]: unknown;
}

/** The fields every line about one run carries. */
export interface RunLogFields {
  run: string;
  /** The run's attempt (0 before its first claim). A publish, delivery or callback try count is `try`. */
  attempt: number;
  /** The run event the line is about, where there is one. */
  seq?: number | null;
  reason: string;
  [field: string]: unknown;
}

export function log(msg: string, fields: LogFields): void {
  console.log(JSON.stringify({ msg, at_ms: Date.now(), ...fields }));
}

export function logRun(msg: string, fields: RunLogFields): void {
  console.log(JSON.stringify({ msg, at_ms: Date.now(), ...fields }));
}
