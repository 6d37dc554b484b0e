// The dashboard as a browser reaches it, for tests: a page request with the session cookie or a
// form (with the Origin a browser sends), and sign-in with a member token.

import { exports } from "cloudflare:workers";
import { expect } from "vitest";

export const ORIGIN = "http://docket.test";

export interface PageOptions {
  cookie?: string;
  form?: Record<string, string>;
  origin?: string | null;
}

/** The request a browser sends for a page: a GET, or a form's POST with the Origin it sends. */
export function pageRequest(path: string, opts: PageOptions = {}): Request {
  const headers: Record<string, string> = {};
  if (opts.cookie) headers.Cookie = opts.cookie;
  let body: string | undefined;
  if (opts.form) {
    body = new URLSearchParams(opts.form).toString();
    headers["Content-Type"] = "application/x-www-form-urlencoded";
    if (opts.origin !== null) headers.Origin = opts.origin ?? ORIGIN;
  }
  return new Request(`${ORIGIN}${path}`, { method: opts.form ? "POST" : "GET", headers, body, redirect: "manual" });
}

export async function page(path: string, opts: PageOptions = {}) {
  const res = await exports.default.fetch(pageRequest(path, opts));
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** The session cookie (`docket_session=<id>`) a successful sign-in's answer sets. */
export function sessionCookie(res: { status: number; headers: Headers }): string {
  expect(res.status).toBe(303);
  const cookie = res.headers.get("Set-Cookie") ?? "";
  expect(cookie).toMatch(/^docket_session=[0-9a-f]{64};/);
  return cookie.split(";")[0];
}

export async function signIn(token: string): Promise<string> {
  return sessionCookie(await page("/dash/sign-in", { form: { token } }));
}
