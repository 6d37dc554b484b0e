// Every timing and limit of Docket, with its default. Each can be overridden by a Worker var of
// the same name (wrangler.toml [vars], `wrangler dev --var NAME:VALUE`, or test bindings). The
// settings and their defaults are in src/settings/settings.ts, the vars' names and parsing in
// src/settings/vars.ts.

import type { Config } from "./settings/settings";
import { parseConfig } from "./settings/vars";

export { DEFAULTS, type Config } from "./settings/settings";

/** Parsed once per environment object: every request and every object an isolate starts shares it. */
const parsed = new WeakMap<object, Config>();

/** Reads the config from Worker vars; a malformed value is a deployment error and throws at once. */
export function loadConfig(vars: Record<string, unknown>): Config {
  let config = parsed.get(vars);
  if (!config) {
    config = Object.freeze(parseConfig(vars));
    parsed.set(vars, config);
  }
  return config;
}

/** What a runner is told at register and heartbeat. */
export function runnerConfig(config: Config) {
  return {
    lease_ttl_ms: config.leaseTtlMs,
    lease_refresh_ms: config.leaseRefreshMs,
    heartbeat_interval_ms: config.heartbeatIntervalMs,
    claim_wait_ms: config.claimWaitMs,
    sandbox_lifetime_ms: config.sandboxLifetimeMs,
    min_cli_version: config.minCliVersion,
    protocols: config.launchProtocols,
  };
}
