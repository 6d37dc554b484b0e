// `npm run test:pack`: the runner as its users get it. Packs runner-cli the way an operator does
// (`npm pack -w runner-cli`, which builds it), installs the tarball into an empty prefix with
// `npm install -g`, and has the installed `docket-runner` answer --help, register against a local
// Docket and start listening. Outside `npm test`: the install fetches better-sqlite3 (from the npm
// cache when it is there, else the registry) and builds it if no prebuilt binary fits.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createOrg, removeTempDirs, ROOT, startDocket, tempDir } from './helpers.mjs';
import { helpOrRefuse, openingComment } from '../../scripts/cli-args.mjs';

helpOrRefuse('npm run test:pack', () => openingComment(import.meta.url));

// Like vitest.config.ts: the local Worker neither sends telemetry nor fetches `Request.cf`.
process.env.WRANGLER_SEND_METRICS ??= 'false';
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= 'false';

const step = (text) => process.stdout.write(`test:pack: ${text}\n`);

function check(ok, what, detail = '') {
  if (!ok) throw new Error(`${what}${detail ? `\n${detail}` : ''}`);
  step(`ok: ${what}`);
}

/** Starts `listen --json` and resolves with its first `started` event, or rejects. */
function firstStart(bin, env) {
  const child = spawn(bin, ['listen', '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`listen did not start within 30 s\n${out}${err}`)), 30_000);
    function finish(e, event) {
      clearTimeout(timer);
      child.kill('SIGTERM');
      if (e) reject(e);
      else resolve(event);
    }
    child.stderr.on('data', (c) => (err += c));
    child.stdout.on('data', (c) => {
      out += c;
      for (const line of out.split('\n')) {
        if (line.includes('"event":"started"')) return finish(null, JSON.parse(line));
      }
    });
    child.on('exit', (code) => finish(new Error(`listen exited with ${code}\n${out}${err}`)));
  });
}

async function main() {
  const work = tempDir('pack');
  const [pack] = JSON.parse(execFileSync('npm', ['pack', '--pack-destination', work, '-w', 'runner-cli', '--json'], { cwd: ROOT, encoding: 'utf8' }));
  const tgz = join(work, pack.filename);
  check(existsSync(tgz), `npm pack -w runner-cli made ${pack.filename}`);

  // A clean directory: the tarball is installed there, away from this repository's node_modules.
  const prefix = join(work, 'global');
  mkdirSync(prefix);
  const install = spawnSync('npm', ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tgz], {
    cwd: work,
    encoding: 'utf8',
    timeout: 600_000,
  });
  check(install.status === 0, `npm install -g ./${pack.filename}`, install.stdout + install.stderr);
  // npm 11 names each package whose install-time script nobody allowed: the runner itself has none
  // (it is built by `prepack`, before the tarball is made), only its dependency better-sqlite3.
  const ownScript = (install.stdout + install.stderr).split('\n').find((line) => /\bdocket-runner@\S+ \(/.test(line));
  check(ownScript === undefined, 'the install asks to allow no script of docket-runner itself', ownScript);
  const bin = join(prefix, 'bin', 'docket-runner');

  const home = tempDir('pack-home');
  const env = { PATH: process.env.PATH, HOME: home, DOCKET_RUNNER_HOME: home };
  const help = spawnSync(bin, ['--help'], { env, encoding: 'utf8' });
  check(help.status === 0 && help.stdout.includes('docket-runner register'), 'docket-runner --help', help.stdout + help.stderr);

  const docket = await startDocket();
  try {
    const org = await createOrg(docket, 'pack');
    const reg = spawnSync(bin, ['register', '--server', docket.url, '--token', org.registration, '--name', 'packed-box'], { env, encoding: 'utf8', timeout: 60_000 });
    check(reg.status === 0 && reg.stdout.includes('registered packed-box'), 'docket-runner register against a local Docket', reg.stdout + reg.stderr);
    const started = await firstStart(bin, env);
    check(started.event === 'started', `docket-runner listen started (${started.message})`);
  } finally {
    await docket.stop();
  }
}

main().then(
  () => {
    removeTempDirs();
    step('passed');
  },
  (e) => {
    removeTempDirs();
    process.stderr.write(`test:pack: FAILED: ${e?.stack ?? e}\n`);
    process.exitCode = 1;
  },
);
