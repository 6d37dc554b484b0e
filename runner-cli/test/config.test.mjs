import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, readConfigFile, resolveConfig, writeConfigFile } from '../src/config.ts';

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

  it('bad values are refused with the option named', () => {
    expect(() => resolveConfig({ flags: { concurrency: 'many' } })).toThrow(/--concurrency must be a non-negative integer/);
    expect(() => resolveConfig({ flags: { concurrency: '0' } })).toThrow(ConfigError);
    expect(() => resolveConfig({ flags: { launchers: ['podman'] } })).toThrow(/unknown launcher "podman"/);
    expect(() => resolveConfig({ flags: { server_url: 'ftp://x' } })).toThrow(/must start with http/);
    expect(() => resolveConfig({ env: { DOCKET_JSON: 'maybe' } })).toThrow(/true or false/);
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

  it('a missing file is an empty config; a broken one is an error that names it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-cfg-'));
    try {
      expect(readConfigFile(dir)).toEqual({});
      writeFileSync(join(dir, 'config.json'), '[1,2]');
      expect(() => readConfigFile(dir)).toThrow(/config.json is not a JSON object/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
