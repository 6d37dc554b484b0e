// The Linear provider inside workerd, as the Worker runs it: @linear/sdk's GraphQL client sends
// Docket's query with the project's API key and its answer's rate-limit headers become the
// headroom. Linear is a fetch answered in-process here (outbound fetch stubbed, nothing leaves);
// test/unit/linear-provider.test.ts covers the rest against the Linear stand-in over HTTP.

import { afterEach, describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import { linearProvider } from "../../src/autopilot/linear/provider";
import type { LinearTracker } from "../../src/autopilot/tracker-config";

const API = "https://linear.example.test/graphql";
const tracker: LinearTracker = { kind: "linear", apiUrl: API, workspace: "acme", team: "ENG", project: null, readyLabel: "ready", readyState: null, reviewState: "In Review", doneStates: [], automationAccounts: [] };
const original = globalThis.fetch;

afterEach(() => {
  globalThis.fetch = original;
});

describe("the Linear provider in workerd", () => {
  it("reads an issue through @linear/sdk's GraphQL client with the API key, and keeps Linear's stated budget", async () => {
    const seen: { authorization: string | null; query: string; variables: Record<string, unknown> }[] = [];
    globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init);
      if (request.url !== API) throw new Error(`unexpected outbound request to ${request.url}`);
      const body = (await request.json()) as { query: string; variables: Record<string, unknown> };
      seen.push({ authorization: request.headers.get("authorization"), ...body });
      const issue = {
        identifier: "ENG-8", number: 8, title: "From workerd", description: "b", url: "https://linear.app/acme/issue/ENG-8/from-workerd",
        updatedAt: "2026-12-01T00:00:00.000Z", state: { name: "Todo", type: "unstarted" }, team: { key: "ENG" }, project: null, labels: { nodes: [{ name: "ready" }] },
      };
      const headers = { "x-ratelimit-requests-limit": "5000", "x-ratelimit-requests-remaining": "4321", "x-ratelimit-requests-reset": "1796500000000" };
      return Response.json({ data: { issue } }, { headers });
    }) as typeof fetch;
    const provider = linearProvider({ id: "apj_workerd", tracker }, { trackerToken: "lin_api_workerd_key" }, DEFAULTS);
    const facts = await provider.getIssue({ provider: "linear", repository: "acme/ENG", number: 8 });
    expect(facts).toMatchObject({ ref: { provider: "linear", repository: "acme/ENG", number: 8 }, title: "From workerd", state: "open", status: "Todo", labels: ["ready"] });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ authorization: "lin_api_workerd_key", variables: { id: "ENG-8" } });
    expect(seen[0]!.query).toContain("issue(id: $id)");
    expect(await provider.headroom!()).toEqual({ remaining: 4321, limit: 5000, resetAtMs: 1796500000000, of: "the Linear API key" });
  });
});
