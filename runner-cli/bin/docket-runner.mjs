#!/usr/bin/env node
// docket-runner: the Docket runner CLI. See runner-cli/README.md.
// The CLI is written in TypeScript (src/) and runs from its build (dist/, made by `npm run build`):
// dist/runner-cli/src/ holds the CLI, dist/src/protocol/ the contract it shares with the server.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/runner-cli/src/cli.js', import.meta.url);
// A checkout that was never built (or whose build was removed) has no dist/: say how to build it
// rather than print a module-resolution stack trace.
if (!existsSync(entry)) {
  process.stderr.write('docket-runner: the CLI is not built (no runner-cli/dist); run `npm run build -w runner-cli` (or `npm ci`) at the repository root\n');
  process.exit(1);
}
const { main } = await import(entry.href);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`docket-runner: ${e?.stack ?? e}\n`);
    process.exitCode = 1;
  },
);
