// Authentication middleware: member, machine and registration tokens are looked up by their
// SHA-256 hash in D1; run-attempt tokens are checked by the run object itself (docs/protocol.md).
// A revoked, expired or used-up token is refused with its reason (src/credentials/tokens.ts).

import { eq, sql } from "drizzle-orm";
import type { Context, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppEnv, Caller } from "./app-types";
import type { Env } from "./env";
import { DocketError } from "./errors";
import { setBounded } from "./lib/bounded-map";
import { fixedStatement, textOnly } from "./db/fixed-statement";
import { tokens } from "./db/schema";
import { countedAll, noCost, type Cost } from "./lib/cost";
import { refusalOf, STORED_TOKEN, type StoredToken } from "./credentials/tokens";
import { sha256Hex, timingSafeEqual, TOKEN_PREFIX } from "./lib/crypto";
import { attemptTokenKey, countCall } from "./rate-limit";

export function bearer(header: string | undefined): string {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  if (!match) throw new DocketError("unauthorized", "send a token as 'Authorization: Bearer <token>'");
  return match[1];
}

/** The token a hash names, built once: every API call reads it (src/db/fixed-statement.ts), its rows counted. */
const TOKEN_BY_HASH = fixedStatement<{ hash: string }>(textOnly.select(STORED_TOKEN).from(tokens).where(eq(tokens.tokenHash, sql.placeholder("hash"))));

/**
 * The caller a token stands for. A token that was issued but no longer works (revoked, its machine
 * deregistered, expired, used up) is a 401 that names why; an unknown one is null.
 */
async function lookup(db: D1Database, token: string, cost: Cost, knownHash?: string): Promise<Caller | null> {
  if (!/^dkt_[mrs]_[0-9a-f]{64}$/.test(token)) return null;
  const hash = knownHash ?? (await sha256Hex(token));
  const [row] = await countedAll<StoredToken>(cost, TOKEN_BY_HASH.bind(db, { hash }));
  if (!row) return null;
  const refused = refusalOf(row, Date.now());
  if (refused) throw refused;
  return { orgId: row.org_id, tokenId: row.id, kind: row.kind, role: row.role, machineId: row.machine_id };
}

/**
 * Verifies a token as `kind` and sets the caller, or throws 401 naming why. The API's middleware
 * and the dashboard's sign-in both verify through this. A caller that has already hashed the token
 * passes its hash.
 */
export async function authenticate(c: Context<AppEnv>, token: string, kind: Caller["kind"], what: string, hash?: string): Promise<Caller> {
  const cost = noCost();
  const caller = await lookup(c.env.DB, token, cost, hash);
  c.set("cost", cost);
  if (!caller || caller.kind !== kind) throw new DocketError("unauthorized", refusal(token, caller, kind, what));
  c.set("caller", caller);
  await countCall(c.env, c.get("config"), kind === "member" ? "member" : "runner", caller.tokenId);
  return caller;
}

/** Why a token that works for no one, or for another kind of call, is refused: the prefix only when it is the wrong one. */
function refusal(token: string, caller: Caller | null, kind: Caller["kind"], what: string): string {
  const needed = `this call needs ${what} (a token starting ${TOKEN_PREFIX[kind]})`;
  if (caller) return `${needed}; this is a ${caller.kind} token`;
  if (token.startsWith(TOKEN_PREFIX[kind])) return `unknown ${what.replace(/^an? /, "")}: this deployment issued no such token (check that it was copied whole)`;
  return needed;
}

/**
 * The member a dashboard session acts as (src/dashboard/api.ts). The dashboard calls this app with an
 * env that carries the session's member under this Symbol, which no request from outside can set, so
 * its cookie never holds the member token and the API still authorizes the call as that member.
 */
const ACTING_MEMBER = Symbol("docket.actingMember");

/** `env` for a call the dashboard makes as `member`, a caller its session check just read from D1. */
export function actingAsMember(env: Env, member: Caller): Env {
  if (member.kind !== "member") throw new Error(`the dashboard acts as a member, not a ${member.kind} token`);
  return { ...env, [ACTING_MEMBER]: member };
}

function actingMember(env: Env): Caller | undefined {
  return (env as { [ACTING_MEMBER]?: Caller })[ACTING_MEMBER];
}

function requireKind(kind: Caller["kind"], what: string) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const acting = kind === "member" ? actingMember(c.env) : undefined;
    if (acting) {
      c.set("cost", noCost());
      c.set("caller", acting);
      await countCall(c.env, c.get("config"), "member", acting.tokenId);
    } else {
      await authenticate(c, bearer(c.req.header("Authorization")), kind, what);
    }
    await next();
  });
}

const requireMember = requireKind("member", "a member token");
const requireMachine = requireKind("machine", "a machine token");

/**
 * Machine tokens this isolate has verified once, by their hash: the organization, token and machine
 * a token belongs to never change, so a claim with a known token needs no D1 statement here. Whether
 * the token still works, its machine's labels and whether a recovery holds dispatch are the
 * scheduler's to check (durable-objects/claim-credentials.ts), where a deregistration is told at once.
 */
const MACHINE_TOKEN = new RegExp(`^${TOKEN_PREFIX.machine}[0-9a-f]{64}$`);
const knownMachineTokens = new Map<string, { orgId: string; tokenId: string; machineId: string }>();

/**
 * A claim's machine token: its caller, and its hash for the scheduler. A token this isolate has not
 * seen is authenticated as any other (unknown, wrong kind, revoked: the same 401s); a known one only
 * counts its call.
 */
const requireClaimingMachine = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearer(c.req.header("Authorization"));
  const hash = MACHINE_TOKEN.test(token) ? await sha256Hex(token) : null;
  const known = hash === null ? undefined : knownMachineTokens.get(hash);
  if (known) {
    c.set("cost", noCost());
    c.set("caller", { orgId: known.orgId, tokenId: known.tokenId, kind: "machine", role: null, machineId: known.machineId });
    await countCall(c.env, c.get("config"), "runner", known.tokenId);
  } else {
    const caller = await authenticate(c, token, "machine", "a machine token", hash ?? undefined);
    setBounded(knownMachineTokens, hash!, { orgId: caller.orgId, tokenId: caller.tokenId, machineId: caller.machineId! }, c.get("config").claimTokensKnownMax);
  }
  c.set("tokenHash", hash!);
  await next();
});
const requireRegistration = requireKind("registration", "a runner registration token");

/** A member token with the admin role: a member token first, so a bad one is a 401 before the role's 403. */
const requireAdmin = createMiddleware<AppEnv>(async (c, next) => {
  await requireMember(c, async () => {
    if (c.get("caller").role !== "admin") throw new DocketError("forbidden", "this call needs an admin member token");
    await next();
  });
});

const requireOperator = createMiddleware<AppEnv>(async (c, next) => {
  const secret = c.env.ADMIN_SECRET;
  if (!secret) throw new DocketError("forbidden", "this deployment has no ADMIN_SECRET configured");
  if (!timingSafeEqual(bearer(c.req.header("Authorization")), secret)) {
    throw new DocketError("unauthorized", "this call needs the deployment's admin secret");
  }
  await next();
});

/** Reports carry a run-attempt token; its format is checked here, its binding by the run object. */
const requireAttemptToken = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearer(c.req.header("Authorization"));
  if (!/^dkt_a_[0-9a-f]{64}$/.test(token)) {
    throw new DocketError("unauthorized", `reports need a run-attempt token (starting ${TOKEN_PREFIX.attempt})`);
  }
  await countCall(c.env, c.get("config"), "runner", await attemptTokenKey(token));
  await next();
});

/**
 * Who may call a route: the credential it asks for (docs/protocol.md, "Credentials"). A route says
 * it once, in its operation (src/openapi/operation.ts), which both documents it and checks it here.
 * `claim` is a machine token checked for a claim (requireClaimingMachine); `admin` is an admin member token.
 */
export type Auth = "none" | "member" | "admin" | "machine" | "claim" | "registration" | "attempt" | "operator";

/** The middleware that checks each credential. */
export const CREDENTIAL_CHECK: Record<Exclude<Auth, "none">, MiddlewareHandler<AppEnv>> = {
  member: requireMember,
  admin: requireAdmin,
  machine: requireMachine,
  claim: requireClaimingMachine,
  registration: requireRegistration,
  attempt: requireAttemptToken,
  operator: requireOperator,
};
