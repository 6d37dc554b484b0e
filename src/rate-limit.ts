// Rate limits (docs/protocol.md, "Rate limits"): per token for the member API and the runner
// protocol, and per client address for failed authentication (guessed tokens). Each is a Workers
// Rate Limiting binding declared in wrangler.toml, whose limit and period live there; a call past
// one is 429 rate_limited with Retry-After.

import type { Config } from "./config";
import type { Env } from "./env";
import { DocketError } from "./errors";
import { sha256Hex } from "./lib/crypto";
import { log } from "./lib/log";

/** Which limit a call counts against, and the binding that holds it. */
export const RATE_LIMIT_BINDINGS = {
  address: "RATE_LIMIT_ADDRESS",
  member: "RATE_LIMIT_MEMBER",
  runner: "RATE_LIMIT_RUNNER",
} as const;

export type RateLimitKind = keyof typeof RATE_LIMIT_BINDINGS;

/**
 * Counts one call against `kind` for `key`; past the limit it throws 429 rate_limited. A
 * deployment without the binding is not limited (every wrangler.toml here declares it).
 */
export async function countCall(env: Env, config: Config, kind: RateLimitKind, key: string): Promise<void> {
  const binding = env[RATE_LIMIT_BINDINGS[kind]] as RateLimit | undefined;
  if (!binding) return;
  let success: boolean;
  try {
    ({ success } = await binding.limit({ key: `${kind}:${key}` }));
  } catch (err) {
    // The limiter is a guard, not a dependency: when it fails, the call goes ahead.
    log("rate_limit.unavailable", { reason: "the rate limit binding failed; the call was let through", limit: kind, error: String(err) });
    return;
  }
  if (success) return;
  throw new DocketError("rate_limited", rateLimitMessage(kind), { limit: kind, retry_after_ms: config.rateLimitRetryAfterMs });
}

function rateLimitMessage(kind: RateLimitKind): string {
  if (kind === "address") return "too many failed authentications from this address; try again later";
  return `too many calls with this ${kind === "member" ? "member" : "runner"} token; try again later`;
}

/**
 * A failed authentication counts against its address, so guessing tokens is slow: past the limit
 * the answer is 429 rate_limited instead of `err`. A valid token from the same address still works.
 * The API's error handler and the dashboard's sign-in and session both count through this.
 */
export async function countFailedAuth(env: Env, config: Config, addressHeader: string | undefined, err: DocketError): Promise<DocketError> {
  try {
    await countCall(env, config, "address", clientAddress(addressHeader));
    return err;
  } catch (limited) {
    if (limited instanceof DocketError) return limited;
    throw limited;
  }
}

/** The caller's address as Cloudflare saw it; local requests carry none. */
export function clientAddress(header: string | undefined): string {
  return header?.trim() || "unknown";
}

/** Attempt tokens are counted by a hash: the limiter never sees a credential. */
export async function attemptTokenKey(token: string): Promise<string> {
  return `attempt:${(await sha256Hex(token)).slice(0, 32)}`;
}
