import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { jobPaths } from '../src/launchers/common.ts';
import { containerName, containerServerUrl, dockerRunArgv } from '../src/launchers/docker.ts';
import { launchers } from '../src/launchers/index.ts';

const base = {
  runId: 'run_abc123',
  attempt: 2,
  image: 'node:20',
  command: ['node', 'agent.mjs', '--fast'],
  workDir: '/data/jobs/run_abc123/2/work',
  stateDir: '/data/jobs/run_abc123/2/docket',
  runnerDir: '/opt/runner',
  envNames: ['DOCKET_URL', 'DOCKET_ATTEMPT_TOKEN', 'DOCKET_RUN_ID', 'DOCKET_ATTEMPT'],
};

describe('docker launcher argv', () => {
  it('labels the container with the run id and attempt and runs the daemon around the command', () => {
    const argv = dockerRunArgv(base);
    expect(argv.slice(0, 4)).toEqual(['run', '--detach', '--name', 'docket-run_abc123-2']);
    expect(argv).toContain('docket.run_id=run_abc123');
    expect(argv).toContain('docket.attempt=2');
    expect(argv[argv.indexOf('docket.run_id=run_abc123') - 1]).toBe('--label');
    const image = argv.indexOf('node:20');
    expect(argv.slice(image)).toEqual(['node:20', 'node', '/opt/docket-runner/bin/docket-runner.mjs', 'daemon', '--', 'node', 'agent.mjs', '--fast']);
  });

  it('mounts the work dir, the daemon state dir and the runner read-only', () => {
    const argv = dockerRunArgv(base);
    expect(argv).toContain('/data/jobs/run_abc123/2/work:/workspace');
    expect(argv).toContain('/data/jobs/run_abc123/2/docket:/docket');
    expect(argv).toContain('/opt/runner:/opt/docket-runner:ro');
    expect(argv[argv.indexOf('--workdir') + 1]).toBe('/workspace');
  });

  it('mounts zod where the daemon finds it when it lies outside the runner (a checkout), and not when inside (an install)', () => {
    const hoisted = dockerRunArgv({ ...base, zodDir: '/repo/node_modules/zod' });
    expect(hoisted[hoisted.indexOf('/repo/node_modules/zod:/opt/node_modules/zod:ro') - 1]).toBe('--volume');
    const installed = dockerRunArgv({ ...base, zodDir: '/opt/runner/node_modules/zod' });
    expect(installed.filter((a) => a.includes('zod'))).toEqual([]);
  });

  it('passes environment variables by name only, so the attempt token never shows in a process listing', () => {
    const argv = dockerRunArgv(base);
    const envs = argv.flatMap((a, i) => (argv[i - 1] === '--env' ? [a] : []));
    expect(envs).toEqual(['DOCKET_ATTEMPT', 'DOCKET_ATTEMPT_TOKEN', 'DOCKET_RUN_ID', 'DOCKET_URL']);
    expect(argv.some((a) => a.includes('='))).toBe(true); // labels only
    expect(argv.filter((a) => a.includes('=')).every((a) => a.startsWith('docket.'))).toBe(true);
  });

  it('adds the network and user only when given', () => {
    expect(dockerRunArgv(base)).not.toContain('--network');
    const argv = dockerRunArgv({ ...base, network: 'host', user: '1000:1000' });
    expect(argv[argv.indexOf('--network') + 1]).toBe('host');
    expect(argv[argv.indexOf('--user') + 1]).toBe('1000:1000');
    expect(argv.indexOf('--network')).toBeLessThan(argv.indexOf('node:20'));
  });

  it("hands a server on the runner's loopback to the container's daemon at the engine's host gateway, and any other URL as it is", () => {
    for (const url of ['http://127.0.0.1:8787', 'http://localhost:8787/', 'http://[::1]:8787']) {
      expect(containerServerUrl(url, null)).toEqual({ url: url.replace(/127\.0\.0\.1|localhost|\[::1\]/, 'host.docker.internal'), hostGateway: true });
      expect(containerServerUrl(url, 'bridge').hostGateway).toBe(true);
      expect(containerServerUrl(url, 'host')).toEqual({ url, hostGateway: false });
    }
    expect(containerServerUrl('https://docket.example.com', null)).toEqual({ url: 'https://docket.example.com', hostGateway: false });
    const argv = dockerRunArgv({ ...base, hostGateway: true });
    expect(argv.slice(argv.indexOf('--add-host'), argv.indexOf('--add-host') + 2)).toEqual(['--add-host', 'host.docker.internal:host-gateway']);
    expect(argv.indexOf('--add-host')).toBeLessThan(argv.indexOf('node:20'));
    expect(dockerRunArgv(base)).not.toContain('--add-host');
  });

  it('makes container names docker accepts', () => {
    expect(containerName('run/with spaces', 1)).toBe('docket-run_with_spaces-1');
  });
});

const dirs = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * A docker CLI stand-in: it records each call's argv, and its `run` writes the daemon's launch
 * handshake into the state directory mounted at /docket, as a started daemon would.
 */
function fakeDocker(dir) {
  const calls = join(dir, 'calls.jsonl');
  const bin = join(dir, 'docker');
  writeFileSync(bin, `#!${process.execPath}
const { appendFileSync, writeFileSync } = require('node:fs');
const args = process.argv.slice(2);
appendFileSync(${JSON.stringify(calls)}, JSON.stringify(args) + '\\n');
if (args[0] === 'run') {
  const state = args.find((a) => a.endsWith(':/docket')).slice(0, -':/docket'.length);
  writeFileSync(state + '/launch.json', JSON.stringify({ ok: true }));
  process.stdout.write('container-1\\n');
}
if (args[0] === 'wait') process.stdout.write('0\\n');
`);
  chmodSync(bin, 0o755);
  return { bin, calls: () => readFileSync(calls, 'utf8').trim().split('\n').map((l) => JSON.parse(l)) };
}

describe('the docker launcher', () => {
  it("runs the configured image on the configured network through the configured docker binary, and a run's own image wins", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-docker-'));
    dirs.push(dir);
    const docker = fakeDocker(dir);
    const launcher = launchers({ docker_path: docker.bin, docker_image: 'image-of-the-runner', docker_network: 'net-of-the-runner' }).docker;
    const launch = async (attempt, launch) => {
      const sandbox = await launcher.launch({
        claim: { run_id: 'run_d', attempt, launch }, paths: jobPaths(dir, 'run_d', attempt), docketEnv: { DOCKET_RUN_ID: 'run_d' },
        passEnv: [], checkoutTimeoutMs: 30_000, handshakeTimeoutMs: 10_000,
      });
      await sandbox.remove(0);
      return docker.calls().filter((argv) => argv[0] === 'run').at(-1);
    };
    const configured = await launch(1, { protocol: 'docker', command: ['agent'] });
    expect(configured.slice(configured.indexOf('--network'), configured.indexOf('--network') + 2)).toEqual(['--network', 'net-of-the-runner']);
    expect(configured.slice(configured.indexOf('daemon') - 3, configured.indexOf('daemon') - 1)).toEqual(['image-of-the-runner', 'node']);
    const own = await launch(2, { protocol: 'docker', command: ['agent'], image: 'image-of-the-run' });
    expect(own[own.indexOf('daemon') - 3]).toBe('image-of-the-run');
    expect(docker.calls().map((argv) => argv[0])).toEqual(expect.arrayContaining(['run', 'wait', 'rm']));
  });
});
