// One structured JSON line per event, for `wrangler tail` and log search.
export function log(msg: string, fields: Record<string, unknown>): void {
  console.log(JSON.stringify({ msg, at_ms: Date.now(), ...fields }));
}
