import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { labelList } from '../../src/protocol/common.ts';
import { ConfigError, labelsProblem, readConfigFile, resolveConfig, writeConfigFile } from '../src/config.ts';

describe('configuration precedence', () => {
  it('a flag beats the environment, which beats the config file, which beats the default', () => {
    const file = { concurrency: 2, server_url: 'http://file', stop_grace_ms: 7 };
    const env = { DOCKET_CONCURRENCY: '3', DOCKET_SERVER_URL: 'http://env' };
    const flags = { concurrency: '4' };
    const cfg = resolveConfig({ flags, env, file, home: '/h', host: 'box' });
    expect(cfg.concurrency).toBe(4);
    expect(cfg.server_url).toBe('http://env');
    expect(cfg.stop_grace_ms).toBe(7);
    expect(cfg.backoff_base_ms).toBe(1000);
    expect(cfg.sources).toMatchObject({ concurrency: 'flag', server_url: 'env', stop_grace_ms: 'file', backoff_base_ms: 'default' });
  });

  it('documented defaults: config dir under ~/.config, data dir inside it, host name, process launcher, one job at a time', () => {
    const cfg = resolveConfig({ home: '/home/u', host: 'box' });
    expect(cfg.config_dir).toBe('/home/u/.config/docket-runner');
    expect(cfg.data_dir).toBe('/home/u/.config/docket-runner/data');
    expect(cfg.name).toBe('box');
    expect(cfg.launchers).toEqual(['process']);
    expect(cfg.concurrency).toBe(1);
    expect(cfg.sandbox_lifetime_ms).toBeUndefined(); // the server's value applies
  });

  it('DOCKET_RUNNER_HOME moves the config dir and the data dir with it', () => {
    const cfg = resolveConfig({ env: { DOCKET_RUNNER_HOME: '/srv/runner' }, home: '/home/u' });
    expect(cfg.config_dir).toBe('/srv/runner');
    expect(cfg.data_dir).toBe('/srv/runner/data');
  });

  it('lists come from repeated flags, comma-separated values or JSON arrays', () => {
    expect(resolveConfig({ flags: { labels: ['linux', 'gpu,arm'] } }).labels).toEqual(['linux', 'gpu', 'arm']);
    expect(resolveConfig({ env: { DOCKET_LABELS: 'a, b' } }).labels).toEqual(['a', 'b']);
    expect(resolveConfig({ file: { launchers: ['process', 'docker'] } }).launchers).toEqual(['process', 'docker']);
  });

  it('an empty environment variable does not hide the config file', () => {
    expect(resolveConfig({ env: { DOCKET_SERVER_URL: '' }, file: { server_url: 'http://file' } }).server_url).toBe('http://file');
  });

  it('bad values are refused naming the option as it was given, with the real bound said once', () => {
    expect(() => resolveConfig({ flags: { concurrency: 'many' } })).toThrow('--concurrency: must be an integer of at least 1, got "many"');
    expect(() => resolveConfig({ flags: { concurrency: '0' } })).toThrow('--concurrency: must be an integer of at least 1, got "0"');
    expect(() => resolveConfig({ env: { DOCKET_CONCURRENCY: '-1' } })).toThrow('DOCKET_CONCURRENCY: must be an integer of at least 1, got "-1"');
    expect(() => resolveConfig({ file: { concurrency: 0 } })).toThrow('config.json concurrency: must be an integer of at least 1, got 0');
    expect(() => resolveConfig({ env: { DOCKET_STOP_GRACE_MS: '-5' } })).toThrow('DOCKET_STOP_GRACE_MS: must be a non-negative integer, got "-5"');
    expect(() => resolveConfig({ flags: { claim_wait_ms: '700000' } })).toThrow('--claim-wait-ms: must be an integer from 0 to 600000, got "700000"');
    expect(() => resolveConfig({ flags: { concurrency: '0' } })).toThrow(ConfigError);
    expect(() => resolveConfig({ flags: { launchers: ['podman'] } })).toThrow('--launcher: unknown launcher "podman"; use process, docker or e2b');
    expect(() => resolveConfig({ flags: { server_url: 'ftp://x' } })).toThrow('--server: must start with http:// or https://, got "ftp://x"');
    expect(() => resolveConfig({ env: { DOCKET_JSON: 'maybe' } })).toThrow('DOCKET_JSON: must be true or false, got "maybe"');
  });

  it('labels the server would refuse are refused here, naming where they came from', () => {
    expect(() => resolveConfig({ flags: { labels: ['linux', 'a b'] } })).toThrow('--label: "a b" is not a label: labels are letters, digits and _ . : / -');
    expect(() => resolveConfig({ env: { DOCKET_LABELS: 'gpu,x!' } })).toThrow(/^DOCKET_LABELS: "x!" is not a label/);
    expect(() => resolveConfig({ file: { labels: ['l'.repeat(65)] } })).toThrow(/^config\.json labels: "l{65}" is not a label/);
    expect(() => resolveConfig({ flags: { labels: Array.from({ length: 65 }, (_, i) => `l${i}`) } })).toThrow('--label: at most 64 labels, got 65');
    expect(() => resolveConfig({ flags: { name: ' ' } })).toThrow('--name: must be 1 to 100 characters, got 0');
    expect(resolveConfig({ flags: { labels: ['linux', 'gpu:a100', 'team/x-1.2_b'] } }).labels).toEqual(['linux', 'gpu:a100', 'team/x-1.2_b']);
  });

  it("the runner's label check agrees with the contract's labelList", () => {
    const lists = [
      ['linux'], ['gpu:a100', 'a/b', 'x.y_z-1'], ['a b'], ['é'], ['a\n'], ['l'.repeat(64)], ['l'.repeat(65)], ['a,b'], ['a*'],
      Array.from({ length: 64 }, (_, i) => `l${i}`), Array.from({ length: 65 }, (_, i) => `l${i}`), [],
    ];
    for (const labels of lists) expect(labelsProblem(labels) === null, JSON.stringify(labels)).toBe(labelList.safeParse(labels).success);
  });

  it('a command reads only the options it uses: a bad value of another one does not stop it', () => {
    const env = { DOCKET_CONCURRENCY: '-1', DOCKET_LABELS: 'a b', DOCKET_SERVER_URL: 'ftp://x' };
    const cfg = resolveConfig({ env, keys: ['config_dir', 'data_dir', 'json'], home: '/h' });
    expect(cfg.data_dir).toBe('/h/.config/docket-runner/data');
    expect(() => resolveConfig({ env, keys: ['config_dir', 'data_dir', 'json', 'concurrency'] })).toThrow(/^DOCKET_CONCURRENCY:/);
  });
});

describe('the config file', () => {
  it('is written owner-only (dir 0700, file 0600) and read back', () => {
    const parent = mkdtempSync(join(tmpdir(), 'docket-cfg-'));
    const dir = join(parent, 'nested');
    try {
      const path = writeConfigFile(dir, { machine_id: 'mch_1', machine_token: 'dkt_s_x' });
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(readConfigFile(dir)).toEqual({ machine_id: 'mch_1', machine_token: 'dkt_s_x' });
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it('a missing file is an empty config; a broken one is an error that names it and says what is wrong', () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-cfg-'));
    try {
      expect(readConfigFile(dir)).toEqual({});
      writeFileSync(join(dir, 'config.json'), '[1,2]');
      expect(() => readConfigFile(dir)).toThrow(/config\.json is not a JSON object \(it holds an array\)$/);
      writeFileSync(join(dir, 'config.json'), '{"server_url": "http://x",');
      expect(() => readConfigFile(dir)).toThrow(/config\.json is not valid JSON: .*JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
