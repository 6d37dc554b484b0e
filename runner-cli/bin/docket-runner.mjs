#!/usr/bin/env node
// docket-runner: the Docket runner CLI. See runner-cli/README.md.
import { main } from '../src/cli.mjs';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`docket-runner: ${e?.stack ?? e}\n`);
    process.exitCode = 1;
  },
);
