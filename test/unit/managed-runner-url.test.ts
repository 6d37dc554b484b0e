// MANAGED_RUNNER_DOCKET_URL: the URL a managed runner's container calls (durable-objects/managed-runner.ts
// intercepts its host), checked when the configuration loads.
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";

describe("MANAGED_RUNNER_DOCKET_URL", () => {
  it("defaults to http://docket.internal, a host only the container's interception serves", () => {
    expect(loadConfig({}).managedRunnerDocketUrl).toBe("http://docket.internal");
  });

  it("takes an http(s) URL, such as the Worker's public one", () => {
    expect(loadConfig({ MANAGED_RUNNER_DOCKET_URL: "https://docket.example.com" }).managedRunnerDocketUrl).toBe("https://docket.example.com");
  });

  it("refuses anything that is not an http(s) URL when the configuration loads", () => {
    expect(() => loadConfig({ MANAGED_RUNNER_DOCKET_URL: "docket.internal" })).toThrow(/MANAGED_RUNNER_DOCKET_URL must be an http\(s\) URL, got docket.internal/);
    expect(() => loadConfig({ MANAGED_RUNNER_DOCKET_URL: "ftp://docket.internal" })).toThrow(/MANAGED_RUNNER_DOCKET_URL must be an http\(s\) URL/);
  });
});
