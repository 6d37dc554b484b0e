// The version gate: 426 listener_upgrade_required before any work is handed out
// (../shared/spec/dispatch-lifecycle.md, "The API enforces the minimum CLI version with HTTP 426").

import { describe, expect, it } from "vitest";
import { DEFAULTS, loadConfig } from "../../src/config";
import { versionAtLeast } from "../../src/protocol/version";
import { checkRunnerVersion } from "../../src/routes/runners";
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
    const res = await call("POST", "/v1/runners/register", { token: reg, body: { name: "x", protocols: ["firecracker"], cli_version: "1.0.0" } });
    expect(res.status).toBe(426);
    expect(res.body.error.protocols).toEqual(["process", "docker", "e2b"]);
  });

  it("a runner that serves only e2b (the seed's sandbox) registers and claims an e2b run", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { protocols: ["e2b"] });
    const runId = await dispatch(admin, { launch: { protocol: "e2b", command: ["agent"] } });
    const res = await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: "0.1.0", protocols: ["e2b"], wait_ms: 0 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ run_id: runId, launch: { protocol: "e2b" } });
  });

  it("a claim below the minimum version is 426 and hands out no work", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const res = await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: "0.0.1", protocols: ["process"], wait_ms: 0 } });
    expect(res.status).toBe(426);
    const noProtocol = await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: "0.1.0", protocols: ["firecracker"], wait_ms: 0 } });
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

  it("a cli_version that is not a version is 400 invalid_request naming it, not 426, and changes nothing", async () => {
    const { admin } = await createOrg();
    const reg = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration", max_uses: 1 } })).body.token;
    const bad = await call("POST", "/v1/runners/register", { token: reg, body: { name: "x", protocols: ["process"], cli_version: "latest" } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_request", field: "cli_version" });
    expect(bad.body.error.message).toContain("semantic version");
    // The refused registration used none of the token's one use.
    expect((await call("POST", "/v1/runners/register", { token: reg, body: { name: "x", protocols: ["process"], cli_version: "1.0.0" } })).status).toBe(201);

    const runner = await registerRunner(admin);
    for (const path of ["/v1/runners/heartbeat", "/v1/runners/claim"]) {
      const res = await call("POST", path, { token: runner.token, body: { cli_version: "1.2", protocols: ["process"] } });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field: "cli_version" });
    }
    const runners = (await call("GET", "/v1/runners", { token: admin })).body.runners;
    expect(runners.find((r: { id: string }) => r.id === runner.machineId).cli_version).not.toBe("1.2");
  });
});

describe("version precedence", () => {
  it("a prerelease is below its release, as semver orders them", () => {
    expect(versionAtLeast("0.2.0-rc.1", "0.2.0")).toBe(false);
    expect(versionAtLeast("0.2.0", "0.2.0-rc.1")).toBe(true);
    expect(versionAtLeast("0.2.0-rc.1", "0.2.0-rc.1")).toBe(true);
    expect(versionAtLeast("0.2.0-rc.2", "0.2.0-rc.10")).toBe(false); // numeric identifiers compare as numbers
    expect(versionAtLeast("0.2.0-alpha", "0.2.0-alpha.1")).toBe(false); // fewer identifiers sort first
    expect(versionAtLeast("0.2.0-alpha.beta", "0.2.0-alpha.1")).toBe(true); // alphanumeric above numeric
    expect(versionAtLeast("0.2.0-beta", "0.2.0-alpha")).toBe(true);
    expect(versionAtLeast("0.1.9", "0.2.0-rc.1")).toBe(false);
    expect(versionAtLeast("0.2.1-rc.1", "0.2.0")).toBe(true);
    expect(versionAtLeast("0.2.0+build.7", "0.2.0")).toBe(true); // build metadata does not count
    expect(versionAtLeast("0.2", "0.1.0")).toBe(false);
  });

  it("a runner at 0.2.0-rc.1 is refused when the minimum is 0.2.0", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    // The gate the register, heartbeat and claim routes call, with a minimum of 0.2.0.
    const config = { ...DEFAULTS, minCliVersion: "0.2.0" };
    expect(() => checkRunnerVersion(config, "0.2.0-rc.1", ["process"])).toThrow(/older than the minimum 0.2.0/);
    expect(() => checkRunnerVersion(config, "0.2.0", ["process"])).not.toThrow();
    const res = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: "0.1.0-rc.1", protocols: ["process"] } });
    expect(res.status).toBe(426); // the deployed minimum is 0.1.0
  });
});

describe("the upgrade hint", () => {
  it("a 426 says how this deployment distributes its runner, and names no npm package", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const res = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: "0.0.1", protocols: ["process"] } });
    expect(res.status).toBe(426);
    expect(res.body.error.upgrade).toBe(DEFAULTS.runnerUpgradeHint);
    expect(res.body.error.upgrade).toContain("npm install -g ./docket-runner-<version>.tgz");
    expect(res.body.error.message).toContain(DEFAULTS.runnerUpgradeHint);
    expect(JSON.stringify(res.body)).not.toContain("docket-runner@latest");
  });

  it("RUNNER_UPGRADE_HINT replaces it", () => {
    expect(loadConfig({ RUNNER_UPGRADE_HINT: "download https://example.com/runner.tgz" }).runnerUpgradeHint).toBe("download https://example.com/runner.tgz");
  });
});
