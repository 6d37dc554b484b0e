// The GitHub provider inside workerd, as the Worker runs it: the App's key as GitHub hands it out
// (PKCS#1 PEM) signs the installation-token JWT with Web Crypto, and reads go out with the token.
// GitHub is a fetch answered in-process here; test/unit/github-provider.test.ts covers the rest
// against the fake GitHub over HTTP.

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DEFAULTS, type Config } from "../../src/config";
import { githubProvider } from "../../src/autopilot/github/provider";
import { d1GitHubLedger } from "../../src/autopilot/github/usage-store";
import { appKeyPair } from "./app-key";
import { createProject } from "./autopilot-fakes";
import { page, signIn } from "./dashboard-helpers";
import { call, createOrg } from "./helpers";

const API = "https://github.example.test/api/v3";

const fromBase64Url = (text: string) => Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));

describe("the GitHub provider in workerd", () => {
  it("signs the App JWT with a PKCS#1 key and reads the issue with the installation token", async () => {
    const { pkcs1Pem, publicKey } = await appKeyPair();
    const seen: string[] = [];
    const fakeGitHub = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      const request = new Request(input, init);
      const url = new URL(request.url);
      const authorization = request.headers.get("authorization") ?? "";
      seen.push(`${request.method} ${url.pathname} ${authorization.split(" ")[0]}`);
      if (url.pathname === "/api/v3/app/installations/31/access_tokens") {
        const [h, p, s] = authorization.replace(/^bearer /i, "").split(".");
        const valid = await crypto.subtle.verify("RSASSA-PKCS1-v1_5", publicKey, fromBase64Url(s!), new TextEncoder().encode(`${h}.${p}`));
        const claims = JSON.parse(new TextDecoder().decode(fromBase64Url(p!)));
        if (!valid || String(claims.iss) !== "17") return Response.json({ message: "A JSON web token could not be decoded" }, { status: 401 });
        return Response.json({ token: "ghs_workerd", expires_at: new Date(Date.now() + 3_600_000).toISOString(), permissions: { issues: "read" }, repository_selection: "all" }, { status: 201 });
      }
      if (authorization !== "token ghs_workerd") return Response.json({ message: "Bad credentials" }, { status: 401 });
      return Response.json({
        number: 8,
        title: "From workerd",
        body: "b",
        state: "open",
        state_reason: null,
        labels: [{ name: "ready" }],
        html_url: "https://github.example.test/acme/app/issues/8",
        repository_url: `${API}/repos/acme/app`,
        updated_at: "2026-03-01T00:00:00Z",
      });
    };
    const provider = githubProvider(
      { id: "apj_workerd", repository: "acme/app", githubApiUrl: API, appId: "17", installationId: "31" },
      { privateKey: pkcs1Pem },
      DEFAULTS,
      fakeGitHub as typeof fetch,
    );
    const facts = await provider.getIssue({ provider: "github", repository: "acme/app", number: 8 });
    expect(facts).toMatchObject({ title: "From workerd", labels: ["ready"], state: "open" });
    expect(seen).toEqual(["POST /api/v3/app/installations/31/access_tokens bearer", "GET /api/v3/repos/acme/app/issues/8 token"]);
  });
});

/**
 * GitHub as a fetch answered in-process, as GitHub answers conditional reads: each issue a weak
 * ETag of its version, a matching If-None-Match a 304 with no body; the rate limit goes down by
 * one for every answer but a 304. `versions` is each issue's version; `seen` each request's
 * method, path and status.
 */
function conditionalGitHub(api: string) {
  const versions = new Map<number, number>();
  const seen: string[] = [];
  let remaining = 5_000;
  const resetS = Math.ceil(Date.now() / 1000) + 1_800;
  const fetchImpl = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    if (url.pathname.endsWith("/access_tokens")) {
      return Response.json({ token: "ghs_ledger", expires_at: new Date(Date.now() + 3_600_000).toISOString() }, { status: 201 });
    }
    const number = Number(/\/issues\/(\d+)$/.exec(url.pathname)?.[1]);
    const etag = `W/"${number}-${versions.get(number) ?? 0}"`;
    const notModified = request.headers.get("if-none-match") === etag;
    if (!notModified) remaining -= 1;
    const headers = { etag, "x-ratelimit-limit": "5000", "x-ratelimit-remaining": String(remaining), "x-ratelimit-reset": String(resetS) };
    seen.push(`${url.pathname} ${notModified ? 304 : 200}`);
    if (notModified) return new Response(null, { status: 304, headers });
    const issue = { number, title: `v${versions.get(number) ?? 0}`, body: "", state: "open", labels: [], html_url: `https://github.com/acme/app/issues/${number}`, repository_url: `${api}/repos/acme/app`, updated_at: "2026-03-01T00:00:00Z" };
    return Response.json(issue, { headers });
  };
  return { fetchImpl: fetchImpl as typeof fetch, versions, seen, resetS };
}

describe("the GitHub ledger in D1", () => {
  const API = "https://api.github.com";
  const ref = (number: number) => ({ provider: "github" as const, repository: "acme/app", number });

  it("an unchanged issue read again is a 304 GitHub does not count; the project read and its console page show the counted requests and the installation's headroom", async () => {
    const org = await createOrg("github-ledger");
    const project = await createProject(org.admin, { repository: "acme/app" });
    const { pkcs1Pem } = await appKeyPair();
    const gh = conditionalGitHub(API);
    const provider = () => githubProvider(project, { privateKey: pkcs1Pem }, DEFAULTS, gh.fetchImpl, d1GitHubLedger(env.DB, project, DEFAULTS));
    expect((await provider().getIssue(ref(3)))?.title).toBe("v0");
    // Another provider (another tick): the validator comes from D1.
    expect((await provider().getIssue(ref(3)))?.title).toBe("v0");
    expect(gh.seen).toEqual(["/repos/acme/app/issues/3 200", "/repos/acme/app/issues/3 304"]);
    gh.versions.set(3, 1);
    expect((await provider().getIssue(ref(3)))?.title).toBe("v1");

    const read = await call("GET", `/v1/autopilot/projects/${project.id}`, { token: org.admin });
    expect(read.status).toBe(200);
    expect(read.body.github_budget).toEqual({ requests_last_hour: 2, rate_limit: { remaining: 4_998, limit: 5_000, reset_at_ms: gh.resetS * 1_000 }, reserve: DEFAULTS.autopilotGithubReserve });
    const console = await page(`/dash/autopilot/${project.id}`, { cookie: await signIn(org.admin) });
    expect(console.status).toBe(200);
    expect(console.text).toContain("Requests GitHub counted in the last hour</dt><dd>2</dd>");
    expect(console.text).toContain("4998 of 5000 left");
  });

  it("keeps at most GITHUB_CACHE_ENTRIES_MAX validators per installation: the least recently confirmed is read in full again", async () => {
    const org = await createOrg("github-ledger-bound");
    const project = await createProject(org.admin, { repository: "acme/app", github: { app_id: "123456", installation_id: "55501", private_key: (await appKeyPair()).pkcs1Pem } });
    const { pkcs1Pem } = await appKeyPair();
    const config: Config = { ...DEFAULTS, githubCacheEntriesMax: 2 };
    const gh = conditionalGitHub(API);
    const provider = () => githubProvider(project, { privateKey: pkcs1Pem }, config, gh.fetchImpl, d1GitHubLedger(env.DB, project, config));
    for (const n of [1, 2, 3]) {
      await provider().getIssue(ref(n));
      await new Promise((r) => setTimeout(r, 2));
    }
    await provider().getIssue(ref(3));
    await provider().getIssue(ref(1));
    expect(gh.seen.slice(3)).toEqual(["/repos/acme/app/issues/3 304", "/repos/acme/app/issues/1 200"]);
  });
});
