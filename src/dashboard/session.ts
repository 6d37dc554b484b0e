// Dashboard sign-in: the member token lives in an HttpOnly, Secure, SameSite=Strict cookie scoped to
// /dash, and is verified on every request exactly as the API verifies a bearer token (src/auth.ts),
// so a revoked token's cookie stops working at the next page.

import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../app-types";
import { authenticate } from "../auth";
import { DocketError } from "../errors";
import { countFailedAuth } from "../rate-limit";

export const SESSION_COOKIE = "docket_session";
export const DASH = "/dash";
const COOKIE_OPTIONS = { path: DASH, httpOnly: true, secure: true, sameSite: "Strict" } as const;

export function sessionToken(c: Context<AppEnv>): string {
  return getCookie(c, SESSION_COOKIE) ?? "";
}

/**
 * Verifies the token as a member token; throws 401 unauthorized (or 429) as the API would. A
 * refused token counts against the caller's address as it does in the API, so the sign-in form
 * and cookies are no faster a way to guess tokens.
 */
export async function verifyMember(c: Context<AppEnv>, token: string): Promise<void> {
  try {
    await authenticate(c, token, "member", "a member token");
  } catch (err) {
    if (err instanceof DocketError && err.code === "unauthorized") throw await countFailedAuth(c.env, c.get("config"), c.req.header("CF-Connecting-IP"), err);
    throw err;
  }
}

export function startSession(c: Context<AppEnv>, token: string): void {
  setCookie(c, SESSION_COOKIE, token, COOKIE_OPTIONS);
}

export function endSession(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, COOKIE_OPTIONS);
}

/** Pages need a session: without one, or with a token that no longer works, the answer is the sign-in page. */
export const requireSession = createMiddleware<AppEnv>(async (c, next) => {
  const token = sessionToken(c);
  if (!token) return c.redirect(`${DASH}/sign-in`, 303);
  try {
    await verifyMember(c, token);
  } catch (err) {
    if (!(err instanceof DocketError) || err.code !== "unauthorized") throw err;
    endSession(c);
    return c.redirect(`${DASH}/sign-in?ended=1`, 303);
  }
  await next();
});
