// Dashboard sessions, from outside (README.md, "Dashboard"): the cookie holds a session id, not the
// member token; sign-out, revocation, an expired token, idle and absolute expiry each end the session
// on the server, so an old cookie no longer opens a page.

import { describe, expect, it } from "vitest";
import { env } from "cloudflare:workers";
import { loadConfig } from "../../src/config";
import { sha256Hex } from "../../src/lib/crypto";
import { pruneStorage } from "../../src/retention";
import { page, signIn } from "./dashboard-helpers";
import { call, createOrg } from "./helpers";

const config = loadConfig(env);

/** The session id a `docket_session=<id>` cookie carries. */
const idOf = (cookie: string) => cookie.slice("docket_session=".length);

async function storedSession(cookie: string) {
  return env.DB.prepare("SELECT * FROM dashboard_sessions WHERE id_hash = ?").bind(await sha256Hex(idOf(cookie))).first<Record<string, unknown>>();
}

/** Moves a stored session's clocks back, as if sign-in or the last recorded page view happened that long ago. */
async function age(cookie: string, ages: { createdMsAgo?: number; seenMsAgo?: number }) {
  const now = Date.now();
  const hash = await sha256Hex(idOf(cookie));
  if (ages.createdMsAgo !== undefined) await env.DB.prepare("UPDATE dashboard_sessions SET created_at_ms = ? WHERE id_hash = ?").bind(now - ages.createdMsAgo, hash).run();
  if (ages.seenMsAgo !== undefined) await env.DB.prepare("UPDATE dashboard_sessions SET seen_at_ms = ? WHERE id_hash = ?").bind(now - ages.seenMsAgo, hash).run();
}

async function sessionsOfToken(tokenId: string): Promise<number> {
  return (await env.DB.prepare("SELECT count(*) AS n FROM dashboard_sessions WHERE token_id = ?").bind(tokenId).first<{ n: number }>())!.n;
}

/** A page the cookie no longer opens: the sign-in page, saying why, and the cookie cleared. */
async function expectEnded(cookie: string, why: string) {
  const res = await page("/dash", { cookie });
  expect(res.status).toBe(303);
  expect(res.headers.get("Location")).toBe(`/dash/sign-in?ended=${why}`);
  expect(res.headers.get("Set-Cookie")).toMatch(/^docket_session=;.*Max-Age=0/);
  expect(await storedSession(cookie)).toBeNull();
}

describe("dashboard sessions", () => {
  it("the session cookie holds a random session id, not the member token; D1 keeps only its hash, and the id is no API token", async () => {
    const { admin } = await createOrg();
    const res = await page("/dash/sign-in", { form: { token: admin } });
    const setCookie = res.headers.get("Set-Cookie") ?? "";
    expect(setCookie).toMatch(/^docket_session=[0-9a-f]{64};/);
    expect(setCookie).not.toContain(admin);
    expect(setCookie).not.toContain(admin.slice("dkt_m_".length));
    expect(setCookie).toMatch(/Max-Age=43200/);
    const cookie = setCookie.split(";")[0];
    const stored = (await storedSession(cookie))!;
    expect(Object.values(stored)).not.toContain(idOf(cookie));
    expect(Object.values(stored)).not.toContain(admin);
    expect((await page("/dash", { cookie })).status).toBe(200);
    expect((await call("GET", "/v1/runs", { token: idOf(cookie) })).status).toBe(401);
  });

  it("signing out ends the session on the server: the old cookie no longer opens a page", async () => {
    const { admin } = await createOrg();
    const cookie = await signIn(admin);
    expect((await page("/dash/runs", { cookie })).status).toBe(200);
    const out = await page("/dash/sign-out", { cookie, form: {} });
    expect(out.status).toBe(303);
    expect(out.headers.get("Location")).toBe("/dash/sign-in");
    expect(out.headers.get("Set-Cookie")).toMatch(/^docket_session=;.*Max-Age=0/);
    // A copy of the cookie kept from before sign-out (another tab, a stolen copy) is refused.
    await expectEnded(cookie, "unknown");
    expect((await page("/dash/sign-in?ended=unknown")).text).toContain("Your session ended: sign in again.");
  });

  it("revoking a member token ends its sessions: no session of it is left, and its cookie leads to sign-in", async () => {
    const { admin } = await createOrg();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member", name: "laptop" } })).body;
    const [first, second] = [await signIn(member.token), await signIn(member.token)];
    expect(await sessionsOfToken(member.id)).toBe(2);
    expect((await call("DELETE", `/v1/tokens/${member.id}`, { token: admin })).status).toBe(200);
    expect(await sessionsOfToken(member.id)).toBe(0);
    await expectEnded(first, "unknown");
    await expectEnded(second, "unknown");
  });

  it("a revocation refused as the last admin token's leaves that token's sessions working", async () => {
    const { admin } = await createOrg();
    const cookie = await signIn(admin);
    const adminId = (await call("GET", "/v1/tokens", { token: admin })).body.tokens[0].id as string;
    expect((await page(`/dash/tokens/${adminId}/revoke`, { cookie, form: { confirm: "yes" } })).status).toBe(409);
    expect(await sessionsOfToken(adminId)).toBe(1);
    expect((await page("/dash", { cookie })).status).toBe(200);
  });

  it("a session whose member token expired ends at its next page, saying the token no longer works", async () => {
    const { admin } = await createOrg();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body;
    const cookie = await signIn(member.token);
    await env.DB.prepare("UPDATE tokens SET expires_at_ms = ? WHERE id = ?").bind(Date.now() - 1, member.id).run();
    await expectEnded(cookie, "token");
    expect((await page("/dash/sign-in?ended=token")).text).toContain("its member token no longer works");
  });

  it("a session idle for DASHBOARD_SESSION_IDLE_MS ends; a page view before then slides it, writing D1 at most once per DASHBOARD_SESSION_TOUCH_MS", async () => {
    const { admin } = await createOrg();
    const cookie = await signIn(admin);
    // Seen half a touch interval ago: a page view records nothing.
    await age(cookie, { seenMsAgo: config.dashboardSessionTouchMs / 2 });
    const recorded = (await storedSession(cookie))!.seen_at_ms as number;
    expect((await page("/dash", { cookie })).status).toBe(200);
    expect((await storedSession(cookie))!.seen_at_ms).toBe(recorded);
    // Seen just inside the idle window: the page view moves the idle expiry forward.
    await age(cookie, { seenMsAgo: config.dashboardSessionIdleMs - 1_000 });
    const before = Date.now();
    expect((await page("/dash", { cookie })).status).toBe(200);
    expect((await storedSession(cookie))!.seen_at_ms).toBeGreaterThanOrEqual(before);
    // Seen a full idle window ago: ended.
    await age(cookie, { seenMsAgo: config.dashboardSessionIdleMs });
    await expectEnded(cookie, "idle");
    expect((await page("/dash/sign-in?ended=idle")).text).toContain("Your session ended after a time without activity");
  });

  it("a session ends DASHBOARD_SESSION_MAX_MS after sign-in, however busy", async () => {
    const { admin } = await createOrg();
    const cookie = await signIn(admin);
    await age(cookie, { createdMsAgo: config.dashboardSessionMaxMs - 1_000, seenMsAgo: 0 });
    expect((await page("/dash", { cookie })).status).toBe(200);
    await age(cookie, { createdMsAgo: config.dashboardSessionMaxMs, seenMsAgo: 0 });
    await expectEnded(cookie, "expired");
    expect((await page("/dash/sign-in?ended=expired")).text).toContain("Your session reached its time limit");
  });

  it("a token holds at most DASHBOARD_SESSIONS_PER_TOKEN_MAX sessions: a sign-in past it ends the least recently seen", async () => {
    const { admin } = await createOrg();
    const adminId = (await call("GET", "/v1/tokens", { token: admin })).body.tokens[0].id as string;
    const oldest = await signIn(admin);
    await age(oldest, { seenMsAgo: 60_000 });
    for (let i = 1; i < config.dashboardSessionsPerTokenMax; i++) await signIn(admin);
    expect(await sessionsOfToken(adminId)).toBe(config.dashboardSessionsPerTokenMax);
    const newest = await signIn(admin);
    expect(await sessionsOfToken(adminId)).toBe(config.dashboardSessionsPerTokenMax);
    await expectEnded(oldest, "unknown");
    expect((await page("/dash", { cookie: newest })).status).toBe(200);
  });

  it("the cron tick's retention deletes sessions past their idle or absolute expiry, a bounded batch at a time, and keeps live ones", async () => {
    const { admin } = await createOrg("retained");
    const adminId = (await call("GET", "/v1/tokens", { token: admin })).body.tokens[0].id as string;
    const [idle, old, live] = [await signIn(admin), await signIn(admin), await signIn(admin)];
    await age(idle, { seenMsAgo: config.dashboardSessionIdleMs });
    await age(old, { createdMsAgo: config.dashboardSessionMaxMs });
    const first = await pruneStorage(env, { ...config, pruneBatchMax: 1 }, Date.now());
    expect(first?.dashboard_sessions).toBe(1);
    await pruneStorage(env, config, Date.now());
    expect(await sessionsOfToken(adminId)).toBe(1);
    expect(await storedSession(live)).not.toBeNull();
  });

  it("a session that could not slide is a configuration error: DASHBOARD_SESSION_TOUCH_MS must be below DASHBOARD_SESSION_IDLE_MS", () => {
    expect(() => loadConfig({ DASHBOARD_SESSION_IDLE_MS: "60000", DASHBOARD_SESSION_TOUCH_MS: "60000" })).toThrow(/DASHBOARD_SESSION_TOUCH_MS must be less than DASHBOARD_SESSION_IDLE_MS/);
  });
});
