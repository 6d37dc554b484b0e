// One consistent surface (docs/protocol.md): a malformed cli_version is a bad call, not an old
// runner; an unsupported method on a known path is 405 with Allow; every list pages the same way;
// every Idempotency-Key follows one rule; a resource's POST and GET answers have one shape.

import { describe, expect, it } from "vitest";
import { call, CLI_VERSION, createOrg, registerRunner } from "./helpers";

describe("a malformed cli_version", () => {
  it("is 400 invalid_request naming cli_version on register, heartbeat and claim, never 426", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const reg = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } })).body.token;
    for (const bad of ["banana", "1.2", "1.2.3.4", "latest"]) {
      const answers = [
        await call("POST", "/v1/runners/register", { token: reg, body: { name: "x", protocols: ["process"], cli_version: bad } }),
        await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: bad, protocols: ["process"] } }),
        await call("POST", "/v1/runners/claim", { token: runner.token, body: { cli_version: bad, protocols: ["process"], wait_ms: 0 } }),
      ];
      for (const res of answers) {
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: "invalid_request", field: "cli_version" });
      }
    }
    // Nothing was registered and the heartbeat recorded nothing.
    const runners = (await call("GET", "/v1/runners", { token: admin })).body.runners;
    expect(runners.map((r: { cli_version: string }) => r.cli_version)).toEqual([CLI_VERSION]);
  });

  it("a well-formed but old version is still 426", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const res = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: "0.0.1", protocols: ["process"] } });
    expect(res.status).toBe(426);
  });
});
