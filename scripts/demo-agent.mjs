#!/usr/bin/env node
// The sample agent of `npm run demo`: it does what its brief asks, without a model. The brief is the
// issue's title and body (docs/autopilot.md, "The Agent Brief"); this agent reads the first `scope`
// entry as the file to edit and the quoted text of the first `acceptance` entry as the line that
// file must end with, and appends it. It runs in the run's checkout; the runner publishes the change.

import { appendFileSync, readFileSync } from "node:fs";

const brief = readFileSync(process.env.DOCKET_BRIEF_FILE ?? "", "utf8");
/** The first `- entry` under `key:` in the brief. */
const firstEntry = (key) => brief.match(new RegExp(`^${key}:\\s*\\n-\\s*(.+)$`, "mi"))?.[1].trim();

console.log("::phase planning");
const file = firstEntry("scope");
const line = firstEntry("acceptance")?.match(/"([^"]+)"/)?.[1];
if (!file || !line) {
  console.error('the brief names no file (scope: - <file>) or no line (acceptance: - … "<line>")');
  process.exit(1);
}
console.log("::phase implementing");
console.log(`appending "${line}" to ${file}`);
appendFileSync(file, `${line}\n`);
console.log("::phase verifying");
