// One consistent surface (docs/protocol.md): a malformed cli_version is a bad call, not an old
// runner; an unsupported method on a known path is 405 with Allow; every list pages the same way;
// every Idempotency-Key follows one rule; a resource's POST and GET answers have one shape.

import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
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

describe("an unsupported method on a known path", () => {
  const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
  /** Every registered route path with the methods the app registered for it. */
  function registered(): Map<string, Set<string>> {
    const byPath = new Map<string, Set<string>>();
    for (const r of app.routes) {
      if (r.method === "ALL") continue;
      byPath.set(r.path, (byPath.get(r.path) ?? new Set()).add(r.method));
    }
    return byPath;
  }
  /** A concrete path for a pattern: each :param gets a value of its own shape, so it matches only itself. */
  const concrete = (path: string) => path.replace(/:(\w+)/g, (_m, name) => `sample-${name}`);

  it("answers 405 method_not_allowed with Allow listing what the path supports, on every route", async () => {
    const routes = registered();
    expect(routes.size).toBeGreaterThan(20);
    for (const [path, methods] of routes) {
      const url = concrete(path);
      // Other patterns may match the same concrete path (e.g. /v1/runs/:id and /v1/runs/events): Allow is their union.
      const allow = new Set<string>();
      for (const [other, otherMethods] of routes) {
        const pattern = new RegExp(`^${other.replace(/:\w+/g, "[^/]+")}$`);
        if (pattern.test(url)) otherMethods.forEach((m) => allow.add(m));
      }
      for (const method of METHODS.filter((m) => !allow.has(m))) {
        const res = await call(method, url);
        expect(res.status, `${method} ${url}`).toBe(405);
        expect(res.body.error.code).toBe("method_not_allowed");
        expect(res.headers.get("Allow"), `${method} ${url}`).toBe([...allow].sort().join(", "));
        expect(res.body.error.allow).toEqual([...allow].sort());
      }
      expect(methods.size).toBeGreaterThan(0);
    }
  });

  it("DELETE /v1/runs is 405 with Allow: GET, POST; an unknown path is still 404", async () => {
    const res = await call("DELETE", "/v1/runs");
    expect(res.status).toBe(405);
    expect(res.headers.get("Allow")).toBe("GET, POST");
    const unknown = await call("GET", "/v1/nothing-here");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("not_found");
    expect(unknown.headers.get("Allow")).toBeNull();
    expect((await call("DELETE", "/v1/runs/run_0/extra/deep")).status).toBe(404);
  });
});
