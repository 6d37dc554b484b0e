// Wrangler's output as `npm start` and `npm run demo` show it. Wrangler lists every binding and
// variable of the Worker (over a hundred lines, all of them in wrangler.toml) before it is ready:
// that table is left out and one line says where they are. The rest passes through line by line.
//
// The output goes through this process, not straight to the terminal, so that a reader that goes
// away (`npm start | head`, a closed terminal) never closes the pipe wrangler and its workerd write
// their request log to: a write to a closed pipe is the "Broken pipe" workerd stops on, with a
// stack trace. This process keeps reading and drops what it can no longer write.

import { createInterface } from "node:readline";

const TABLE_START = "Your Worker has access to the following bindings:";

/** Whether `stream` still takes writes. @param {NodeJS.WritableStream & { destroyed?: boolean, writable?: boolean }} stream */
const open = (stream) => stream.writable !== false && !stream.destroyed;

/**
 * Makes writes to `stream` after its reader went away a no-op instead of an EPIPE that ends this
 * process (and, with it, the reader of wrangler's output).
 * @param {NodeJS.WritableStream} stream
 */
export function tolerateClosedReader(stream) {
  stream.on("error", () => undefined);
}

/**
 * Copies wrangler's `from` to `to` without its bindings table.
 * @param {NodeJS.ReadableStream} from @param {NodeJS.WritableStream} to
 */
export function relayWranglerOutput(from, to) {
  let inTable = false;
  createInterface({ input: from, crlfDelay: Infinity }).on("line", (line) => {
    if (line.includes(TABLE_START)) {
      inTable = true;
      if (open(to)) to.write("The Worker's bindings and variables are in wrangler.toml (README.md, \"Configuration\").\n");
      return;
    }
    // The table ends at its first blank line.
    if (inTable) {
      inTable = line.trim() !== "";
      return;
    }
    if (open(to)) to.write(`${line}\n`);
  });
}
