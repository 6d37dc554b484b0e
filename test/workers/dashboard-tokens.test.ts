// The dashboard's tokens page (README.md, "Dashboard", Tokens): an admin mints member and
// registration tokens, sees a new token's secret once, renames and revokes tokens, all through
// /v1/tokens; the list is a table on a wide window and a card per token on a phone.

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { page, signIn } from "./dashboard-helpers";
import { call, CLI_VERSION, createOrg } from "./helpers";

type Json = Record<string, any>;

const listed = async (admin: string): Promise<Json[]> => (await call("GET", "/v1/tokens", { token: admin })).body.tokens;
const byName = async (admin: string, name: string) => (await listed(admin)).find((t) => t.name === name);

/** The secret a minted-token page shows in its read-only field. */
function secretOf(html: string): string {
  const match = html.match(/id="minted-token" type="text" readonly="" value="(dkt_[mr]_[^"]+)"/);
  expect(match, html).not.toBeNull();
  return match![1];
}

/** The row of token `id` in the page's tokens table. */
function rowOf(html: string, id: string): string {
  const start = html.indexOf(`<tr data-token="${id}">`);
  expect(start, html).toBeGreaterThanOrEqual(0);
  return html.slice(start, html.indexOf("</tr>", start));
}

describe("minting tokens from the dashboard", () => {
  it("an admin mints a member token: its secret is on the form's answer alone, with copy-it-now and no-store, and it works", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const before = Date.now();
    const minted = await page("/dash/tokens", { cookie: session, form: { kind: "member", name: "ci-bot", role: "admin", expires_in: "2", expires_unit: "days" } });
    expect(minted.status).toBe(200);
    expect(minted.headers.get("Cache-Control")).toBe("no-store");
    expect(minted.headers.get("Location")).toBeNull();
    expect(minted.text).toContain("Copy it now: this is the only time Docket shows this token.");
    const secret = secretOf(minted.text);
    expect(secret).toMatch(/^dkt_m_/);
    expect((await call("GET", "/v1/runs", { token: secret })).status).toBe(200);

    const token = (await byName(admin, "ci-bot"))!;
    expect(token).toMatchObject({ kind: "member", role: "admin", status: "active" });
    expect(token.expires_at_ms - before).toBeGreaterThanOrEqual(2 * 86_400_000);
    expect(token.expires_at_ms - Date.now()).toBeLessThanOrEqual(2 * 86_400_000);
    // The list never shows it again, and nothing else gives it back.
    const list = await page("/dash/tokens", { cookie: session });
    expect(list.text).not.toContain(secret);
    expect(rowOf(list.text, token.id)).toContain("admin");
    expect((await page(`/dash/tokens/${token.id}`, { cookie: session })).text).not.toContain(secret);
  });

  it("a registration token minted with an expiry and max uses lists its kind, expiry and uses of its limit", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const minted = await page("/dash/tokens", { cookie: session, form: { kind: "registration", name: "rack", expires_in: "3", expires_unit: "hours", max_uses: "2" } });
    expect(minted.status).toBe(200);
    const secret = secretOf(minted.text);
    expect(secret).toMatch(/^dkt_r_/);
    expect(minted.text).toContain("<code>docket-runner register --server http://docket.test --token …</code>");
    const registered = await call("POST", "/v1/runners/register", { token: secret, body: { name: "box", labels: [], protocols: ["process"], cli_version: CLI_VERSION } });
    expect(registered.status).toBe(201);

    const token = (await byName(admin, "rack"))!;
    expect(token).toMatchObject({ kind: "registration", role: null, max_uses: 2, uses: 1 });
    expect(token.expires_at_ms - token.created_at_ms).toBe(3 * 3_600_000);
    const row = rowOf((await page("/dash/tokens", { cookie: session })).text, token.id);
    expect(row).toContain('<td data-label="Kind">registration</td>');
    expect(row).toContain('<td data-label="Uses">1 of 2</td>');
    expect(row).toContain(`<td data-label="Expires">${new Date(token.expires_at_ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z")}</td>`);
    expect(row).toContain('<span class="ok">active</span>');
  });

  it("a bad mint form is a clear refusal naming the field, and mints nothing", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const count = (await listed(admin)).length;
    const cases: [Record<string, string>, string][] = [
      [{ kind: "registration", expires_in: "31", expires_unit: "days" }, "expires_in_ms"],
      [{ kind: "member", expires_in: "soon", expires_unit: "days" }, "expires_in_ms"],
      [{ kind: "member", expires_in: "2", expires_unit: "fortnights" }, "The expiry&#39;s unit is one of minutes, hours, days."],
      [{ kind: "registration", max_uses: "0" }, "max_uses"],
      [{ kind: "machine" }, "kind"],
    ];
    for (const [form, named] of cases) {
      const res = await page("/dash/tokens", { cookie: session, form });
      expect(res.status, JSON.stringify(form)).toBe(400);
      expect(res.text, JSON.stringify(form)).toContain(named);
      expect(res.text).not.toContain('id="minted-token"');
    }
    expect(await listed(admin)).toHaveLength(count);
  });

  it("a member without the admin role is offered no mint form, and a hand-made one is refused and mints nothing", async () => {
    const { admin } = await createOrg();
    const plain = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member", name: "plain" } })).body;
    const session = await signIn(plain.token);
    expect((await page("/dash/tokens", { cookie: session })).text).not.toContain('action="/dash/tokens"');
    const refused = await page("/dash/tokens", { cookie: session, form: { kind: "member", role: "admin", name: "escalated" } });
    expect(refused.status).toBe(403);
    expect(await byName(admin, "escalated")).toBeUndefined();
    const rename = await page(`/dash/tokens/${plain.id}/rename`, { cookie: session, form: { name: "renamed by a member" } });
    expect(rename.status).toBe(403);
    expect((await byName(admin, "plain"))!.id).toBe(plain.id);
  });
});

describe("renaming and revoking tokens from the dashboard", () => {
  it("an admin renames a token from its page; an empty name is refused and changes nothing", async () => {
    const { admin } = await createOrg();
    const token = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration", name: "rack-1" } })).body;
    const session = await signIn(admin);
    const own = (await page(`/dash/tokens/${token.id}`, { cookie: session })).text;
    expect(own).toContain(`action="/dash/tokens/${token.id}/rename"`);
    expect(own).toContain('aria-label="Rename rack-1"');
    const renamed = await page(`/dash/tokens/${token.id}/rename`, { cookie: session, form: { name: "rack-3 spare" } });
    expect(renamed.status).toBe(303);
    expect(renamed.headers.get("Location")).toBe(`/dash/tokens/${token.id}?done=token+renamed`);
    const after = (await page(`/dash/tokens/${token.id}?done=token+renamed`, { cookie: session })).text;
    expect(after).toContain("<h1>Token rack-3 spare</h1>");
    expect(after).toContain("Done: token renamed.");
    const empty = await page(`/dash/tokens/${token.id}/rename`, { cookie: session, form: { name: "  " } });
    expect(empty.status).toBe(400);
    expect(empty.text).toContain("name");
    expect((await listed(admin)).find((t) => t.id === token.id)!.name).toBe("rack-3 spare");
  });

  it("revoking needs the confirmation box: unticked it revokes nothing; ticked the token is refused and listed as revoked", async () => {
    const { admin } = await createOrg();
    const token = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member", name: "ci" } })).body;
    const session = await signIn(admin);
    const row = rowOf((await page("/dash/tokens", { cookie: session })).text, token.id);
    expect(row).toContain(`action="/dash/tokens/${token.id}/revoke"`);
    expect(row).toContain('<input type="checkbox" name="confirm" value="yes" required=""/> refuse every call with ci from now on');
    expect(row).toContain('aria-label="Revoke ci"');

    const unconfirmed = await page(`/dash/tokens/${token.id}/revoke`, { cookie: session, form: {} });
    expect(unconfirmed.status).toBe(400);
    expect(unconfirmed.text).toContain("Tick the confirmation box");
    expect((await call("GET", "/v1/runs", { token: token.token })).status).toBe(200);

    const revoked = await page(`/dash/tokens/${token.id}/revoke`, { cookie: session, form: { confirm: "yes" } });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get("Location")).toBe(`/dash/tokens?done=token+${token.id}+revoked`);
    expect((await call("GET", "/v1/runs", { token: token.token })).status).toBe(401);
    const after = rowOf((await page("/dash/tokens", { cookie: session })).text, token.id);
    expect(after).toContain('<span class="muted">revoked</span>');
    expect(after).not.toContain("/revoke");
  });

  it("a token past the list's first page still has its page, read from the API by its id", async () => {
    const { admin } = await createOrg();
    const oldest = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration", name: "the oldest" } })).body;
    // DASHBOARD_ROWS_MAX is the list's page; newer tokens push the oldest past it.
    const rowsMax = Number(env.DASHBOARD_ROWS_MAX ?? 100);
    await Promise.all(Array.from({ length: rowsMax }, () => call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } })));
    const session = await signIn(admin);
    expect((await page("/dash/tokens", { cookie: session })).text).not.toContain(oldest.id);
    const own = await page(`/dash/tokens/${oldest.id}`, { cookie: session });
    expect(own.status).toBe(200);
    expect(own.text).toContain("<h1>Token the oldest</h1>");
    const unknown = await page(`/dash/tokens/tok_${"0".repeat(24)}`, { cookie: session });
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain("<h1>Not found</h1>");
  });

  it("the token list is a table on a wide window and a card per token on a phone, each cell labelled with its column", async () => {
    const { admin } = await createOrg();
    const html = (await page("/dash/tokens", { cookie: await signIn(admin) })).text;
    expect(html).toContain('<div class="table-wrap"><table id="tokens" class="cards">');
    for (const label of ["Token", "Kind", "Role", "Status", "Expires", "Uses", "Created", "Revoked", "Action"]) {
      expect(html).toContain(`<th scope="col">${label}</th>`);
      expect(html).toContain(`<td data-label="${label}"`);
    }
  });
});
