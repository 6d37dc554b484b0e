import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_DIR } from './package-dir.js';

/** The CLI version sent on register, heartbeat and claim: the package's own version. */
export const CLI_VERSION = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')).version;
