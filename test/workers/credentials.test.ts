// Credentials an operator controls: tokens listed and revoked, registration tokens that expire and
// count their uses, machines deregistered with their attempts left to the reaper
// (docs/protocol.md, "Organizations and tokens" and "Runners").

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import { revokeToken } from "../../src/credentials/tokens";
import worker from "../../src/index";
import { sha256Hex } from "../../src/lib/crypto";
import { dispatchBuild, readyToBuild } from "./builds-helpers";
import { ageRun, attemptCall, call, claim, CLI_VERSION, createOrg, dispatch, getRun, registerRunner, runAlarm, schedulerOf, setSchedulerConfig, sleep, untilClaimWaits } from "./helpers";

const MIN = 60_000;

async function mint(admin: string, body: Record<string, unknown>) {
  const res = await call("POST", "/v1/tokens", { token: admin, body });
  if (res.status !== 201) throw new Error(`mint: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; token: string; expires_at_ms: number | null; max_uses: number | null; created_at_ms: number };
}

function register(registration: string, name = "box") {
  return call("POST", "/v1/runners/register", {
    token: registration,
    body: { name, labels: [], protocols: ["process"], cli_version: CLI_VERSION },
  });
}

const revoke = (admin: string, id: string) => call("DELETE", `/v1/tokens/${id}`, { token: admin });
const deregister = (admin: string, machineId: string) => call("DELETE", `/v1/runners/${machineId}`, { token: admin });
const runnerIds = async (admin: string) => (await call("GET", "/v1/runners", { token: admin })).body.runners.map((r: { id: string }) => r.id);
const heartbeat = (machineToken: string) => call("POST", "/v1/runners/heartbeat", { token: machineToken, body: { cli_version: CLI_VERSION, protocols: ["process"] } });

describe("listing tokens", () => {
  it("lists member and registration tokens newest first in pages, without machine tokens, and never shows a token or its hash", async () => {
    const { admin } = await createOrg();
    const minted = [
      await mint(admin, { kind: "member", role: "member", name: "ci" }),
      await mint(admin, { kind: "registration", name: "rack", max_uses: 3 }),
      await mint(admin, { kind: "member", role: "admin" }),
    ];
    await registerRunner(admin); // mints one more registration token and a machine token
    const seen: Record<string, any>[] = [];
    const texts: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const res = await call("GET", `/v1/tokens?limit=2${cursor ? `&cursor=${cursor}` : ""}`, { token: admin });
      expect(res.status).toBe(200);
      expect(res.body.tokens.length).toBeLessThanOrEqual(2);
      texts.push(JSON.stringify(res.body));
      seen.push(...res.body.tokens);
      cursor = res.body.next_cursor;
      if (cursor === null) break;
    }
    // The first admin, three minted here and registerRunner's registration token; no machine token.
    expect(seen).toHaveLength(5);
    expect(seen.map((t) => t.kind).sort()).toEqual(["member", "member", "member", "registration", "registration"]);
    const order = seen.map((t) => [t.created_at_ms, t.id]);
    expect(order).toEqual([...order].sort((a, b) => (b[0] - a[0]) || (b[1] < a[1] ? -1 : 1)));
    expect(seen.find((t) => t.id === minted[1].id)).toMatchObject({
      kind: "registration", name: "rack", status: "active", max_uses: 3, uses: 0, revoked_at_ms: null, expires_at_ms: minted[1].expires_at_ms,
    });
    expect(seen.find((t) => t.id === minted[0].id)).toMatchObject({ kind: "member", role: "member", name: "ci", max_uses: null, uses: null, expires_at_ms: null });
    const hashes = (await env.DB.prepare("SELECT token_hash FROM tokens").all<{ token_hash: string }>()).results.map((r) => r.token_hash);
    for (const text of texts) {
      expect(text).not.toMatch(/dkt_[mrs]_/);
      for (const hash of hashes) expect(text).not.toContain(hash);
    }
    const registrations = await call("GET", "/v1/tokens?kind=registration", { token: admin });
    expect(registrations.body.tokens.map((t: { kind: string }) => t.kind)).toEqual(["registration", "registration"]);
  });

  it("a cursor that no page gave is 400 invalid_request naming it", async () => {
    const { admin } = await createOrg();
    const res = await call("GET", "/v1/tokens?cursor=abc", { token: admin });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "cursor" });
  });
});

describe("revoking tokens", () => {
  it("a revoked member token gets 401 unauthorized (reason revoked) everywhere; revoking again answers the same", async () => {
    const { admin } = await createOrg();
    const member = await mint(admin, { kind: "member", role: "member" });
    const runId = await dispatch(member.token);
    expect((await call("GET", "/v1/runs", { token: member.token })).status).toBe(200);

    const revoked = await revoke(admin, member.id);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id: member.id, kind: "member", status: "revoked" });
    expect(revoked.body.revoked_at_ms).toBeGreaterThanOrEqual(member.created_at_ms);
    expect(JSON.stringify(revoked.body)).not.toContain(member.token);

    for (const [method, path, body] of [
      ["GET", "/v1/runs", undefined],
      ["GET", `/v1/runs/${runId}`, undefined],
      ["POST", "/v1/runs", { brief: "x", launch: { command: ["x"] } }],
      ["POST", `/v1/runs/${runId}/cancel`, {}],
      ["GET", "/v1/runners", undefined],
    ] as const) {
      const res = await call(method, path, { token: member.token, body });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body.error).toMatchObject({ code: "unauthorized", reason: "revoked" });
    }
    expect((await getRun(admin, runId)).state).toBe("queued");

    const again = await revoke(admin, member.id);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(revoked.body);
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    await runAlarm(runId);
  });

  it("a revoked registration token registers nothing: 401 reason revoked", async () => {
    const { admin } = await createOrg();
    const registration = await mint(admin, { kind: "registration" });
    expect((await revoke(admin, registration.id)).body.status).toBe("revoked");
    const res = await register(registration.token);
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ code: "unauthorized", reason: "revoked" });
    expect(await runnerIds(admin)).toEqual([]);
  });

  it("the last active admin token cannot be revoked: 409 last_admin_token, and it keeps working", async () => {
    const { admin } = await createOrg();
    const first = (await call("GET", "/v1/tokens", { token: admin })).body.tokens[0];
    const refused = await revoke(admin, first.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "last_admin_token", token_id: first.id });
    expect((await call("GET", "/v1/tokens", { token: admin })).status).toBe(200);

    // With a second admin the first can go; then the second is the last one.
    const second = await mint(admin, { kind: "member", role: "admin" });
    expect((await revoke(second.token, first.id)).status).toBe(200);
    expect((await call("GET", "/v1/runs", { token: admin })).body.error.reason).toBe("revoked");
    expect((await revoke(second.token, second.id)).body.error.code).toBe("last_admin_token");
    // A member token does not count as an admin.
    await mint(second.token, { kind: "member", role: "member" });
    expect((await revoke(second.token, second.id)).status).toBe(409);
  });

  it("two admins revoking each other at once: exactly one succeeds, so the organization keeps an admin", async () => {
    const { admin } = await createOrg();
    const other = await mint(admin, { kind: "member", role: "admin" });
    const firstId = (await call("GET", "/v1/tokens", { token: admin })).body.tokens.find((t: { id: string }) => t.id !== other.id).id;
    const answers = await Promise.all([revoke(admin, other.id), revoke(other.token, firstId)]);
    // The loser is refused either as the last admin (409) or, when the winner came first, as a revoked token (401).
    const [won, lost] = [...answers].sort((a, b) => a.status - b.status);
    expect(won.status).toBe(200);
    expect([409, 401]).toContain(lost.status);
    expect(lost.body.error.code).toBe(lost.status === 409 ? "last_admin_token" : "unauthorized");
    const active = (await env.DB.prepare("SELECT count(*) AS n FROM tokens WHERE id IN (?, ?) AND revoked_at_ms IS NULL").bind(other.id, firstId).first<{ n: number }>())!;
    expect(active.n).toBe(1);
  });

  it("the revocation's last-admin check holds for two revocations that both passed authentication", async () => {
    const { admin, orgId } = await createOrg();
    const other = await mint(admin, { kind: "member", role: "admin" });
    const firstId = (await call("GET", "/v1/tokens", { token: admin })).body.tokens.find((t: { id: string }) => t.id !== other.id).id;
    const now = Date.now();
    const results = await Promise.all([revokeToken(env.DB, orgId, other.id, now), revokeToken(env.DB, orgId, firstId, now)]);
    expect(results.sort()).toEqual([false, true]);
    const active = (await env.DB.prepare("SELECT count(*) AS n FROM tokens WHERE org_id = ? AND role = 'admin' AND revoked_at_ms IS NULL").bind(orgId).first<{ n: number }>())!;
    expect(active.n).toBe(1);
  });

  it("machine tokens are not revoked here (404): a machine is deregistered instead; unknown and malformed ids are refused", async () => {
    const { admin, orgId } = await createOrg();
    const runner = await registerRunner(admin);
    const machineToken = (await env.DB.prepare("SELECT id FROM tokens WHERE org_id = ? AND kind = 'machine'").bind(orgId).first<{ id: string }>())!;
    const res = await revoke(admin, machineToken.id);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
    expect((await heartbeat(runner.token)).status).toBe(200);
    expect((await revoke(admin, `tok_${"0".repeat(24)}`)).status).toBe(404);
    const malformed = await revoke(admin, "nope");
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({ code: "invalid_request", field: "id" });
  });
});

describe("reading one token", () => {
  it("an admin reads a member or registration token by id as the list shows it; a machine token, another organization's or a member without the role gets nothing", async () => {
    const { admin, orgId } = await createOrg();
    const token = await mint(admin, { kind: "registration", name: "rack", max_uses: 2 });
    const read = await call("GET", `/v1/tokens/${token.id}`, { token: admin });
    expect(read.status).toBe(200);
    expect(read.body).toEqual((await call("GET", "/v1/tokens", { token: admin })).body.tokens.find((t: { id: string }) => t.id === token.id));
    expect(read.body).not.toHaveProperty("token");
    await registerRunner(admin);
    const machineToken = (await env.DB.prepare("SELECT id FROM tokens WHERE org_id = ? AND kind = 'machine'").bind(orgId).first<{ id: string }>())!;
    expect((await call("GET", `/v1/tokens/${machineToken.id}`, { token: admin })).status).toBe(404);
    expect((await call("GET", `/v1/tokens/${token.id}`, { token: (await createOrg("other")).admin })).body.error.code).toBe("not_found");
    const member = await mint(admin, { kind: "member", role: "member" });
    expect((await call("GET", `/v1/tokens/${token.id}`, { token: member.token })).status).toBe(403);
  });
});

describe("renaming tokens", () => {
  const rename = (admin: string, id: string, body: unknown) => call("PATCH", `/v1/tokens/${id}`, { token: admin, body });

  it("an admin renames a member or registration token: the list shows the new name, and the token works as before", async () => {
    const { admin } = await createOrg();
    const member = await mint(admin, { kind: "member", role: "member", name: "ci" });
    const registration = await mint(admin, { kind: "registration", name: "rack", max_uses: 2 });
    const renamed = await rename(admin, member.id, { name: "  nightly ci  " });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ id: member.id, name: "nightly ci", kind: "member", role: "member", status: "active" });
    expect(renamed.body).not.toHaveProperty("token");
    expect((await rename(admin, registration.id, { name: "rack-3" })).body).toMatchObject({ name: "rack-3", max_uses: 2, uses: 0 });
    const listed = (await call("GET", "/v1/tokens", { token: admin })).body.tokens;
    expect(listed.find((t: { id: string }) => t.id === member.id).name).toBe("nightly ci");
    expect(listed.find((t: { id: string }) => t.id === registration.id).name).toBe("rack-3");
    expect((await call("GET", "/v1/runs", { token: member.token })).status).toBe(200);
    expect((await register(registration.token)).status).toBe(201);
    // A revoked token keeps its record, and may be renamed too.
    expect((await revoke(admin, member.id)).status).toBe(200);
    expect((await rename(admin, member.id, { name: "old ci" })).body).toMatchObject({ name: "old ci", status: "revoked" });
  });

  it("a bad name, another field, a machine token, another organization's token or a member without the admin role renames nothing", async () => {
    const { admin, orgId } = await createOrg();
    const token = await mint(admin, { kind: "member", role: "member", name: "ci" });
    for (const body of [{ name: "" }, { name: "   " }, { name: "x".repeat(101) }, {}, { name: "ok", role: "admin" }]) {
      const res = await rename(admin, token.id, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    await registerRunner(admin);
    const machineToken = (await env.DB.prepare("SELECT id FROM tokens WHERE org_id = ? AND kind = 'machine'").bind(orgId).first<{ id: string }>())!;
    expect((await rename(admin, machineToken.id, { name: "mine" })).status).toBe(404);
    const other = await createOrg("other");
    expect((await rename(other.admin, token.id, { name: "theirs" })).body.error.code).toBe("not_found");
    expect((await rename(token.token, token.id, { name: "myself" })).status).toBe(403);
    const listed = (await call("GET", "/v1/tokens", { token: admin })).body.tokens;
    expect(listed.find((t: { id: string }) => t.id === token.id)).toMatchObject({ name: "ci", role: "member" });
    const machineName = (await env.DB.prepare("SELECT name FROM tokens WHERE id = ?").bind(machineToken.id).first<{ name: string | null }>())!;
    expect(machineName.name).not.toBe("mine");
  });
});

/** POST /v1/tokens under the deployment's real TOKEN_TTL_MIN_MS (the tests' binding lowers it). */
async function mintUnderDefaults(admin: string, body: Record<string, unknown>) {
  const request = new Request("http://docket.test/v1/tokens", { method: "POST", headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const ctx = createExecutionContext();
  const res = await worker.fetch(request, { ...env, TOKEN_TTL_MIN_MS: String(DEFAULTS.tokenTtlMinMs) }, ctx);
  await waitOnExecutionContext(ctx);
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe("token expiry at creation", () => {
  it("a token that would expire before TOKEN_TTL_MIN_MS is refused at creation with 400 naming expires_in_ms, and nothing is made", async () => {
    const { admin } = await createOrg();
    const listed = async () => (await call("GET", "/v1/tokens", { token: admin })).body.tokens.length;
    const before = await listed();
    for (const kind of ["registration", "member"]) {
      const refused = await mintUnderDefaults(admin, { kind, expires_in_ms: 1 });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: "invalid_request", field: "expires_in_ms", min: DEFAULTS.tokenTtlMinMs });
      expect(refused.body.error.message).toContain("TOKEN_TTL_MIN_MS");
    }
    expect(await listed()).toBe(before);
    const shortest = await mintUnderDefaults(admin, { kind: "registration", expires_in_ms: DEFAULTS.tokenTtlMinMs });
    expect(shortest.status).toBe(201);
    expect(shortest.body.status).toBe("active");
  });

  it("a member token may expire: its expiry is shown, and past it the token is refused with 401 reason expired", async () => {
    const { admin } = await createOrg();
    const forever = await mint(admin, { kind: "member" });
    expect(forever.expires_at_ms).toBeNull();
    const member = await mint(admin, { kind: "member", role: "member", expires_in_ms: 50 });
    expect(member.expires_at_ms).toBe(member.created_at_ms + 50);
    await sleep(100);
    const refused = await call("GET", "/v1/runs", { token: member.token });
    expect(refused.status).toBe(401);
    expect(refused.body.error).toMatchObject({ code: "unauthorized", reason: "expired" });
    const listed = (await call("GET", "/v1/tokens?kind=member", { token: admin })).body.tokens.find((t: { id: string }) => t.id === member.id);
    expect(listed).toMatchObject({ status: "expired", expires_at_ms: member.expires_at_ms });
    expect((await call("GET", "/v1/runs", { token: forever.token })).status).toBe(200);
  });
});

describe("registration tokens that expire and count their uses", () => {
  it("a registration token expires after REGISTRATION_TOKEN_TTL_MS by default; a longer expiry than the maximum is refused", async () => {
    const { admin } = await createOrg();
    const token = await mint(admin, { kind: "registration" });
    expect(token.expires_at_ms).toBe(token.created_at_ms + DEFAULTS.registrationTokenTtlMs);
    expect(token.max_uses).toBeNull();
    const short = await mint(admin, { kind: "registration", expires_in_ms: 60_000, max_uses: 5 });
    expect(short.expires_at_ms).toBe(short.created_at_ms + 60_000);
    expect(short.max_uses).toBe(5);

    const tooLong = await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration", expires_in_ms: DEFAULTS.registrationTokenTtlMaxMs + 1 } });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toMatchObject({ code: "invalid_request", field: "expires_in_ms" });
    const memberUses = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", max_uses: 2 } });
    expect(memberUses.status).toBe(400);
    expect(memberUses.body.error).toMatchObject({ code: "invalid_request", field: "max_uses" });
    expect((await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration", max_uses: 0 } })).body.error.field).toBe("max_uses");
  });

  it("an expired registration token gets 401 reason expired and registers nothing", async () => {
    const { admin } = await createOrg();
    const token = await mint(admin, { kind: "registration", expires_in_ms: 50 });
    await sleep(100);
    const res = await register(token.token);
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ code: "unauthorized", reason: "expired" });
    expect(res.body.error.message).toContain("expired");
    expect(await runnerIds(admin)).toEqual([]);
    const listed = (await call("GET", "/v1/tokens?kind=registration", { token: admin })).body.tokens[0];
    expect(listed).toMatchObject({ id: token.id, status: "expired", uses: 0 });
  });

  it("a token with max_uses registers that many machines; the next gets 401 reason used_up", async () => {
    const { admin } = await createOrg();
    const token = await mint(admin, { kind: "registration", max_uses: 2 });
    expect((await register(token.token, "one")).status).toBe(201);
    expect((await register(token.token, "two")).status).toBe(201);
    const third = await register(token.token, "three");
    expect(third.status).toBe(401);
    expect(third.body.error).toMatchObject({ code: "unauthorized", reason: "used_up" });
    expect(await runnerIds(admin)).toHaveLength(2);
    const listed = (await call("GET", "/v1/tokens?kind=registration", { token: admin })).body.tokens[0];
    expect(listed).toMatchObject({ id: token.id, status: "used_up", uses: 2, max_uses: 2 });
  });

  it("concurrent registrations never exceed max_uses", async () => {
    const { admin } = await createOrg();
    const token = await mint(admin, { kind: "registration", max_uses: 3 });
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => register(token.token, `box-${i}`)));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(3);
    for (const refused of answers.filter((a) => a.status !== 201)) {
      expect(refused.status).toBe(401);
      expect(refused.body.error.reason).toBe("used_up");
    }
    expect(await runnerIds(admin)).toHaveLength(3);
  });

  it("registration tokens made before expiry existed expire 7 days after they were made (migration 0003)", async () => {
    const { admin, orgId } = await createOrg();
    const DAY = 24 * 60 * MIN;
    const legacy = async (ageMs: number) => {
      const token = `dkt_r_${[...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
      const hash = [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)))].map((b) => b.toString(16).padStart(2, "0")).join("");
      const id = `tok_${crypto.randomUUID().replace(/-/g, "").slice(0, 24)}`;
      await env.DB.prepare("INSERT INTO tokens (id, org_id, kind, token_hash, created_at_ms) VALUES (?, ?, 'registration', ?, ?)")
        .bind(id, orgId, hash, Date.now() - ageMs)
        .run();
      return token;
    };
    const old = await legacy(8 * DAY);
    const recent = await legacy(DAY);
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.startsWith("0003_"))!;
    const backfill = migration.queries.filter((q) => q.includes("UPDATE"));
    expect(backfill).toHaveLength(1);
    await env.DB.prepare(backfill[0]).run();
    const refused = await register(old);
    expect(refused.status).toBe(401);
    expect(refused.body.error.reason).toBe("expired");
    expect((await register(recent)).status).toBe(201);
    expect(await runnerIds(admin)).toHaveLength(1);
  });

  it("a registration refused by the version gate takes no use", async () => {
    const { admin } = await createOrg();
    const token = await mint(admin, { kind: "registration", max_uses: 1 });
    const old = await call("POST", "/v1/runners/register", { token: token.token, body: { name: "x", protocols: ["process"], cli_version: "0.0.1" } });
    expect(old.status).toBe(426);
    expect((await register(token.token)).status).toBe(201);
  });
});

describe("deregistering a machine", () => {
  it("its machine token gets 401 reason machine_deregistered, it leaves GET /v1/runners, and a second call answers the same", async () => {
    const { admin } = await createOrg();
    const kept = await registerRunner(admin, { name: "kept" });
    const gone = await registerRunner(admin, { name: "gone" });
    const res = await deregister(admin, gone.machineId);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: gone.machineId, name: "gone" });
    expect(res.body.deregistered_at_ms).toEqual(expect.any(Number));
    expect(await runnerIds(admin)).toEqual([kept.machineId]);
    for (const answer of [await heartbeat(gone.token), await claim(gone.token, 0)]) {
      expect(answer.status).toBe(401);
      expect(answer.body.error).toMatchObject({ code: "unauthorized", reason: "machine_deregistered" });
    }
    expect((await heartbeat(kept.token)).status).toBe(200);
    const again = await deregister(admin, gone.machineId);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(res.body);
    expect((await deregister(admin, `mch_${"0".repeat(24)}`)).status).toBe(404);
  });

  it("a claim already waiting when it is deregistered ends 401 machine_deregistered, and a run dispatched after is left for another machine", async () => {
    const { orgId, admin } = await createOrg();
    const gone = await registerRunner(admin, { name: "gone" });
    const scheduler = schedulerOf(orgId);
    // The claim waits through the deregistration, however slow (the tests' CLAIM_WAIT_MS is 1 s).
    await setSchedulerConfig(orgId, { claimWaitMs: 60_000 });
    const waiting = claim(gone.token, 60_000);
    await untilClaimWaits(orgId);
    expect((await deregister(admin, gone.machineId)).status).toBe(200);
    const runId = await dispatch(admin);

    const answer = await waiting;
    expect(answer.status).toBe(401);
    expect(answer.body.error).toMatchObject({ code: "unauthorized", reason: "machine_deregistered" });
    expect((await scheduler.readStats()).waiters).toBe(0);
    expect(await getRun(admin, runId)).toMatchObject({ state: "queued", attempt: 0 });
    // Its token, verified by the scheduler before, is checked again: a later claim is refused, by the API and by the scheduler itself.
    const again = await claim(gone.token, 0);
    expect(again.status).toBe(401);
    expect(again.body.error).toMatchObject({ code: "unauthorized", reason: "machine_deregistered" });
    const offered = { cli_version: CLI_VERSION, protocols: ["process"] };
    const late = await scheduler.claim({ orgId, tokenHash: await sha256Hex(gone.token), protocols: ["process"], offered, waitMs: 0 });
    expect(late).toMatchObject({ grant: null, refused: { error: { code: "unauthorized", reason: "machine_deregistered" } } });

    const fresh = await registerRunner(admin, { name: "fresh" });
    expect((await claim(fresh.token, 0)).body).toMatchObject({ run_id: runId, attempt: 1 });
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    await ageRun(runId, 2 * MIN);
    await runAlarm(runId);
  });

  it("a claimed run it held cannot be launched or leased (401); the reaper requeues it after the launch deadline and another machine takes it", async () => {
    const { admin } = await createOrg();
    const gone = await registerRunner(admin, { name: "gone" });
    const runId = await dispatch(admin);
    expect((await claim(gone.token, 0)).body.run_id).toBe(runId);
    await deregister(admin, gone.machineId);

    for (const what of ["lease", "launched"]) {
      const res = await attemptCall(gone.token, runId, 1, what, what === "launched" ? { sandbox_id: "sbx" } : {});
      expect(res.status).toBe(401);
      expect(res.body.error.reason).toBe("machine_deregistered");
    }
    expect((await getRun(admin, runId)).state).toBe("claimed");
    await ageRun(runId, DEFAULTS.launchDeadlineMs + 1_000);
    await runAlarm(runId);
    const requeued = await getRun(admin, runId);
    expect(requeued.state).toBe("queued");
    expect(requeued.steps[0]).toMatchObject({ attempt: 1, machine_id: gone.machineId });

    const fresh = await registerRunner(admin, { name: "fresh" });
    await ageRun(runId, DEFAULTS.backoffMaxMs);
    const second = await claim(fresh.token, 0);
    expect(second.body).toMatchObject({ run_id: runId, attempt: 2 });
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    await ageRun(runId, 2 * MIN);
    await runAlarm(runId);
  });

  it("a launched run it held is failed by the reaper once its lease lapsed and its daemon was silent", async () => {
    const { admin } = await createOrg();
    const gone = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(gone.token, 0);
    expect((await attemptCall(gone.token, runId, 1, "launched", { sandbox_id: "sbx" })).status).toBe(200);
    await deregister(admin, gone.machineId);
    expect((await attemptCall(gone.token, runId, 1, "lease")).status).toBe(401);

    await ageRun(runId, DEFAULTS.daemonSilenceMs + MIN);
    await runAlarm(runId);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("failed");
    expect(run.last_error).toContain("daemon silent");
  });

  it("a deregistered machine does not count as a connected runner for a build dispatch", async () => {
    const { admin, requestId } = await readyToBuild({ runner: false });
    const runner = await registerRunner(admin);
    await deregister(admin, runner.machineId);
    const res = await dispatchBuild(admin, requestId, "after-deregistration");
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("no_connected_runner");
  });
});
