// Dashboard sign-in: a member token, verified as the API verifies a bearer token (src/auth.ts), opens
// a session (src/credentials/sessions.ts). The HttpOnly, Secure, SameSite=Strict cookie scoped to
// /dash holds only the session's random id; every page checks the session and the token it acts as,
// so sign-out, revocation, an expired token and idle or absolute expiry each end it at the next page.

import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import type { AppEnv, Caller } from "../app-types";
import { authenticate } from "../auth";
import { checkSession, closeSession, openSession, type SessionEnd } from "../credentials/sessions";
import { DocketError } from "../errors";
import { countFailedAuth } from "../rate-limit";

export const SESSION_COOKIE = "docket_session";
export const DASH = "/dash";
const COOKIE_OPTIONS = { path: DASH, httpOnly: true, secure: true, sameSite: "Strict" } as const;

/**
 * Verifies the token as a member token and answers its caller; throws 401 unauthorized (or 429) as
 * the API would. A refused token counts against the caller's address as it does in the API, so the
 * sign-in form is no faster a way to guess tokens.
 */
export async function verifyMember(c: Context<AppEnv>, token: string): Promise<Caller> {
  try {
    return await authenticate(c, token, "member", "a member token");
  } catch (err) {
    if (err instanceof DocketError && err.code === "unauthorized") throw await countFailedAuth(c.env, c.get("config"), c.req.header("CF-Connecting-IP"), err);
    throw err;
  }
}

/** Opens a session acting as `member` and sets its cookie, which the browser drops at the session's absolute expiry. */
export async function startSession(c: Context<AppEnv>, member: Caller): Promise<void> {
  const config = c.get("config");
  const id = await openSession(c.env.DB, config, member, Date.now());
  setCookie(c, SESSION_COOKIE, id, { ...COOKIE_OPTIONS, maxAge: Math.floor(config.dashboardSessionMaxMs / 1000) });
}

/** Signing out: the session is deleted on the server, not only its cookie in this browser. */
export async function endSession(c: Context<AppEnv>): Promise<void> {
  const id = getCookie(c, SESSION_COOKIE);
  if (id) await closeSession(c.env.DB, id);
  deleteCookie(c, SESSION_COOKIE, COOKIE_OPTIONS);
}

/** What the sign-in page says when a session ended (`?ended=`), by why it ended. */
export const SESSION_ENDED: Record<SessionEnd, string> = {
  unknown: "Your session ended: sign in again.",
  idle: "Your session ended after a time without activity: sign in again.",
  expired: "Your session reached its time limit: sign in again.",
  token: "Your session ended because its member token no longer works (revoked or expired): sign in with one that does.",
};

/** Pages need a session: without one, or with one that ended, the answer is the sign-in page, saying why. */
export const requireSession = createMiddleware<AppEnv>(async (c, next) => {
  const id = getCookie(c, SESSION_COOKIE);
  if (!id) return c.redirect(`${DASH}/sign-in`, 303);
  const session = await checkSession(c.env.DB, c.get("config"), id, Date.now());
  if ("ended" in session) {
    deleteCookie(c, SESSION_COOKIE, COOKIE_OPTIONS);
    return c.redirect(`${DASH}/sign-in?ended=${session.ended}`, 303);
  }
  c.set("caller", session.caller);
  await next();
});
