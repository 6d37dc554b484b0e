import { describe, expect, it } from 'vitest';
import { containerName, dockerRunArgv } from '../src/launchers/docker.ts';

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

  it('makes container names docker accepts', () => {
    expect(containerName('run/with spaces', 1)).toBe('docket-run_with_spaces-1');
  });
});
