// A claim is the machine's heartbeat (docs/protocol.md, "Runner protocol"): an idle runner that only
// waits on claims keeps its CLI version, protocols and last seen time current, so build dispatch's
// connected-runner window and the runner list see it without separate heartbeats.

import { describe, expect, it } from "vitest";
import { auditLedgerAfterEachTest, ageRunners, dispatchBuild, readyToBuild } from "./builds-helpers";
import { call } from "./helpers";

auditLedgerAfterEachTest();

function claimAs(token: string, cliVersion: string, protocols: string[]) {
  return call("POST", "/v1/runners/claim", { token, body: { cli_version: cliVersion, protocols, wait_ms: 0 } });
}

describe("the claim is the heartbeat", () => {
  it("a runner heard from only through claims counts as connected for a build dispatch", async () => {
    const { admin, orgId, runner, requestId } = await readyToBuild();
    await ageRunners(orgId, 90_001);
    expect((await dispatchBuild(admin, requestId, "silent")).body.error.code).toBe("no_connected_runner");
    expect((await claimAs(runner!.token, "0.1.0", ["process"])).status).toBe(204);
    expect((await dispatchBuild(admin, requestId, "claiming")).status).toBe(201);
  });

  it("a claim records the CLI version and protocols it carries, as a heartbeat does", async () => {
    const { admin, orgId, runner } = await readyToBuild({ name: "versions" });
    await ageRunners(orgId, 90_001);
    expect((await claimAs(runner!.token, "0.9.3", ["docker", "process"])).status).toBe(204);
    const listed = (await call("GET", "/v1/runners", { token: admin })).body.runners[0];
    expect(listed.cli_version).toBe("0.9.3");
    expect(listed.protocols).toEqual(["docker", "process"]);
  });
});
