// The GitHub provider inside workerd, as the Worker runs it: the App's key as GitHub hands it out
// (PKCS#1 PEM) signs the installation-token JWT with Web Crypto, and reads go out with the token.
// GitHub is a fetch answered in-process here; test/unit/github-provider.test.ts covers the rest
// against the fake GitHub over HTTP.

import { describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import { githubProvider } from "../../src/autopilot/github/provider";

const API = "https://github.example.test/api/v3";

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}
const fromBase64Url = (text: string) => Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));

/** A fresh RSA key pair, its private half as a PKCS#1 PEM (the PKCS#8 wrapper's inner key). */
async function appKeyPair(): Promise<{ pkcs1Pem: string; publicKey: CryptoKey }> {
  const pair = (await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"],
  )) as CryptoKeyPair;
  const pkcs8 = new Uint8Array((await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer);
  // PrivateKeyInfo: SEQUENCE(len) INTEGER 0, AlgorithmIdentifier (15 bytes), OCTET STRING(len) <PKCS#1>.
  let at = 1 + lengthSize(pkcs8, 1) + 3 + 15;
  at += 1 + lengthSize(pkcs8, at + 1);
  const pkcs1 = pkcs8.slice(at);
  const lines = base64(pkcs1).match(/.{1,64}/g)!.join("\n");
  return { pkcs1Pem: `-----BEGIN RSA PRIVATE KEY-----\n${lines}\n-----END RSA PRIVATE KEY-----\n`, publicKey: pair.publicKey };
}
const lengthSize = (der: Uint8Array, at: number) => (der[at]! < 0x80 ? 1 : 1 + (der[at]! & 0x7f));

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
