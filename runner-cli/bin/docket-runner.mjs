#!/usr/bin/env node
// docket-runner: the Docket runner CLI. See runner-cli/README.md.
// The CLI is written in TypeScript (src/) and runs from its build (dist/, made by `npm run build`):
// dist/runner-cli/src/ holds the CLI, dist/src/protocol/ the contract it shares with the server.
import { main } from '../dist/runner-cli/src/cli.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`docket-runner: ${e?.stack ?? e}\n`);
    process.exitCode = 1;
  },
);
