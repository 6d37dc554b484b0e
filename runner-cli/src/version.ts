import { readFileSync } from 'node:fs';

/** The CLI version sent on register, heartbeat and claim: the package's own version. */
export const CLI_VERSION = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
