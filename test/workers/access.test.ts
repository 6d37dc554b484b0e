// Credentials and organizations: no token reads or changes another organization's data
// (../shared/DESIGN.md, invariant 8).

import { describe, expect, it } from "vitest";
import { ADMIN_SECRET, attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, report } from "./helpers";

describe("organizations and credentials", () => {
  it("only the deployment's admin secret creates an organization", async () => {
    expect((await call("POST", "/v1/orgs", { body: { name: "x" } })).body.error.code).toBe("unauthorized");
    expect((await call("POST", "/v1/orgs", { token: "wrong", body: { name: "x" } })).status).toBe(401);
    const ok = await call("POST", "/v1/orgs", { token: ADMIN_SECRET, body: { name: "x" } });
    expect(ok.status).toBe(201);
    expect(ok.body.token.token).toMatch(/^dkt_m_[0-9a-f]{64}$/);
    expect(ok.body.token.role).toBe("admin");
  });

  it("tokens are shown once and stored hashed", async () => {
    const { admin } = await createOrg();
    const { env } = await import("cloudflare:workers");
    const rows = await env.DB.prepare("SELECT token_hash FROM tokens").all<{ token_hash: string }>();
    expect(rows.results.some((r) => r.token_hash === admin)).toBe(false);
    expect(rows.results.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash))).toBe(true);
  });

  it("only admins mint tokens", async () => {
    const { admin } = await createOrg();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const res = await call("POST", "/v1/tokens", { token: member, body: { kind: "registration" } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("forbidden");
  });

  it("a member of another organization can neither see nor cancel a run: 404 not_found, and nothing changes", async () => {
    const a = await createOrg("a");
    const b = await createOrg("b");
    const runId = await dispatch(a.admin);
    expect((await call("GET", `/v1/runs/${runId}`, { token: b.admin })).status).toBe(404);
    expect((await call("GET", `/v1/runs/${runId}/events`, { token: b.admin })).status).toBe(404);
    const cancel = await call("POST", `/v1/runs/${runId}/cancel`, { token: b.admin, body: {} });
    expect(cancel.status).toBe(404);
    expect(cancel.body.error.code).toBe("not_found");
    expect((await call("GET", "/v1/runs", { token: b.admin })).body.runs).toHaveLength(0);
    expect((await getRun(a.admin, runId)).state).toBe("queued");
  });

  it("another organization's runner never claims the run and its calls get 403 other_organization", async () => {
    const a = await createOrg("a");
    const b = await createOrg("b");
    const runnerA = await registerRunner(a.admin);
    const runnerB = await registerRunner(b.admin);
    const runId = await dispatch(a.admin);
    expect((await claim(runnerB.token, 0)).status).toBe(204);
    await claim(runnerA.token, 0);
    const res = await attemptCall(runnerB.token, runId, 1, "lease");
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("other_organization");
    expect((await call("GET", "/v1/runners", { token: b.admin })).body.runners.map((r: { id: string }) => r.id)).toEqual([runnerB.machineId]);
  });

  it("each credential works only where it belongs", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    // A machine token is not a member token, and the other way round.
    expect((await call("GET", "/v1/runs", { token: runner.token })).status).toBe(401);
    expect((await claim(admin, 0)).status).toBe(401);
    // The run-attempt token only reports; a machine token cannot report.
    expect((await call("GET", `/v1/runs/${runId}`, { token: c.attempt_token })).status).toBe(401);
    expect((await report(runner.token, runId, { lines: ["x"] })).status).toBe(401);
    // An attempt token of one run does not report on another.
    const other = await dispatch(admin);
    const res = await report(c.attempt_token, other, { final: { outcome: "failed" } });
    expect(res.status).toBe(401);
    expect((await getRun(admin, other)).state).toBe("queued");
    // A malformed token.
    expect((await call("GET", "/v1/runs", { token: "dkt_m_nothex" })).body.error.code).toBe("unauthorized");
  });

  it("a refused token is told what is wrong with it: unknown, of another kind, or without the prefix", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const unknown = await call("GET", "/v1/runs", { token: `dkt_m_${"0".repeat(64)}` });
    expect(unknown.status).toBe(401);
    expect(unknown.body.error.message).toBe("unknown member token: this deployment issued no such token (check that it was copied whole)");
    const otherKind = await call("GET", "/v1/runs", { token: runner.token });
    expect(otherKind.body.error.message).toBe("this call needs a member token (a token starting dkt_m_); this is a machine token");
    const noPrefix = await claim("not-a-token", 0);
    expect(noPrefix.body.error.message).toBe("this call needs a machine token (a token starting dkt_s_)");
  });
});
