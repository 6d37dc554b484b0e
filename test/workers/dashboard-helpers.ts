// The dashboard as a browser reaches it, for tests: a page request with the session cookie or a
// form (with the Origin a browser sends), and sign-in with a member token.

import { exports } from "cloudflare:workers";
import { expect } from "vitest";

export const ORIGIN = "http://docket.test";

export async function page(path: string, opts: { cookie?: string; form?: Record<string, string>; origin?: string | null } = {}) {
  const headers: Record<string, string> = {};
  if (opts.cookie) headers.Cookie = opts.cookie;
  let body: string | undefined;
  if (opts.form) {
    body = new URLSearchParams(opts.form).toString();
    headers["Content-Type"] = "application/x-www-form-urlencoded";
    if (opts.origin !== null) headers.Origin = opts.origin ?? ORIGIN;
  }
  const res = await exports.default.fetch(new Request(`${ORIGIN}${path}`, { method: opts.form ? "POST" : "GET", headers, body, redirect: "manual" }));
  return { status: res.status, text: await res.text(), headers: res.headers };
}

export async function signIn(token: string): Promise<string> {
  const res = await page("/dash/sign-in", { form: { token } });
  expect(res.status).toBe(303);
  const cookie = res.headers.get("Set-Cookie") ?? "";
  return cookie.split(";")[0];
}
