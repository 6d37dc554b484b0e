// The version gate: 426 listener_upgrade_required before any work is handed out
// (../shared/spec/dispatch-lifecycle.md, "The API enforces the minimum CLI version with HTTP 426").

import { describe, expect, it } from "vitest";
import { call, claim, createOrg, dispatch, getRun, registerRunner } from "./helpers";

describe("the version gate", () => {
  it("register below the minimum CLI version is 426 and registers nothing", async () => {
    const { admin } = await createOrg();
    const reg = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } })).body.token;
    const res = await call("POST", "/v1/runners/register", { token: reg, body: { name: "old", protocols: ["process"], cli_version: "0.0.9" } });
    expect(res.status).toBe(426);
    expect(res.body.error).toMatchObject({ code: "listener_upgrade_required", min_cli_version: "0.1.0" });
    expect((await call("GET", "/v1/runners", { token: admin })).body.runners).toHaveLength(0);
  });

  it("register with no launch protocol in common is 426", async () => {
    const { admin } = await createOrg();
    const reg = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } })).body.token;
    const res = await call("POST", "/v1/runners/register", { token: reg, body: { name: "x", protocols: ["e2b"], cli_version: "1.0.0" } });
    expect(res.status).toBe(426);
    expect(res.body.error.protocols).toEqual(["process", "docker"]);
  });

  it("a claim below the minimum version is 426 and hands out no work", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const res = await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: "0.0.1", protocols: ["process"], wait_ms: 0 } });
    expect(res.status).toBe(426);
    const noProtocol = await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: "0.1.0", protocols: ["e2b"], wait_ms: 0 } });
    expect(noProtocol.status).toBe(426);
    expect((await getRun(admin, runId)).state).toBe("queued");
    expect((await claim(runner.token, 0)).status).toBe(200);
  });

  it("a heartbeat stores the CLI version, shown by GET /v1/runners, and is 426 when below the minimum", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const ok = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: "0.2.0", protocols: ["process"] } });
    expect(ok.status).toBe(200);
    expect(ok.body.config.lease_ttl_ms).toBe(60_000);
    let runners = (await call("GET", "/v1/runners", { token: admin })).body.runners;
    expect(runners[0].cli_version).toBe("0.2.0");
    const old = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: "0.0.5", protocols: ["process"] } });
    expect(old.status).toBe(426);
    runners = (await call("GET", "/v1/runners", { token: admin })).body.runners;
    expect(runners[0].cli_version).toBe("0.0.5");
  });
});
