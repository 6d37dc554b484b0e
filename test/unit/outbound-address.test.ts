// The outbound address policy (src/lib/outbound-address.ts): which hosts a tenant's URL may name,
// what the operator's settings allow, and how redirects are held to the same rule. No request here
// leaves the process: fetch is a function of the test.

import { describe, expect, it } from "vitest";
import { DEFAULTS, loadConfig } from "../../src/config";
import { fetchOutbound, OutboundRefused, outboundRefusal, type OutboundPolicy } from "../../src/lib/outbound-address";

const STRICT: OutboundPolicy = { allowLoopback: false, allowHosts: [] };
const refusal = (url: string, policy: OutboundPolicy = STRICT) => outboundRefusal(new URL(url), policy);

describe("outbound address policy", () => {
  it("refuses loopback, private, shared, link-local, unique-local and mapped addresses, bare IPs and internal names, by default", () => {
    expect(refusal("http://127.8.9.1/")).toBe("127.8.9.1 is a loopback address");
    expect(refusal("http://2130706433/")).toBe("127.0.0.1 is a loopback address");
    expect(refusal("http://LOCALHOST./x")).toBe("localhost is a loopback name");
    expect(refusal("http://[0:0:0:0:0:0:0:1]/")).toBe("[::1] is a loopback address");
    expect(refusal("http://[::ffff:127.0.0.1]/")).toBe("[::ffff:7f00:1] is an IPv4-mapped IPv6 address (a loopback address)");
    expect(refusal("http://[64:ff9b::10.0.0.1]/")).toBe("[64:ff9b::a00:1] is an IPv4-mapped IPv6 address (a private address)");
    expect(refusal("http://172.31.255.255/")).toBe("172.31.255.255 is a private address");
    expect(refusal("http://100.127.0.1/")).toBe("100.127.0.1 is a shared (carrier-grade NAT) address");
    expect(refusal("http://0.0.0.0/")).toBe("0.0.0.0 is an unspecified address");
    expect(refusal("http://[febf::1]/")).toBe("[febf::1] is a link-local address");
    expect(refusal("http://[fc00::1]/")).toBe("[fc00::1] is a unique-local address");
    expect(refusal("http://[2606:4700::1111]/")).toBe("[2606:4700::1111] is a bare IP address");
    expect(refusal("http://nas.home.arpa/")).toBe("nas.home.arpa is an internal name (.home.arpa)");
    expect(refusal("ftp://example.com/")).toBe("ftp: is not http or https");
  });

  it("takes public names, and addresses just outside the refused ranges only when named", () => {
    for (const url of ["https://hooks.example.com/x", "https://api.github.com", "http://172.32.0.1.nip.io/", "https://local.example.com/"]) {
      expect(refusal(url), url).toBeNull();
    }
    expect(refusal("http://172.32.0.1/")).toBe("172.32.0.1 is a bare IP address");
  });

  it("OUTBOUND_ALLOW_LOOPBACK allows loopback and nothing else", () => {
    const local: OutboundPolicy = { allowLoopback: true, allowHosts: [] };
    for (const url of ["http://127.0.0.1:8787/", "http://localhost/", "http://api.localhost/", "http://[::1]:9/"]) expect(refusal(url, local), url).toBeNull();
    expect(refusal("http://10.0.0.1/", local)).toBe("10.0.0.1 is a private address");
    expect(refusal("http://169.254.169.254/", local)).toBe("169.254.169.254 is a link-local address");
  });

  it("OUTBOUND_ALLOW_HOSTS allows exactly the hosts it names, and every name under a *.suffix", () => {
    const { outboundAllowHosts: allowHosts } = loadConfig({ OUTBOUND_ALLOW_HOSTS: " GHE.corp , *.svc.internal, 10.0.0.7,[fd00::7] " });
    expect(allowHosts).toEqual(["ghe.corp", "*.svc.internal", "10.0.0.7", "[fd00::7]"]);
    const policy: OutboundPolicy = { allowLoopback: false, allowHosts };
    for (const url of ["https://ghe.corp/api/v3", "http://hooks.svc.internal/", "http://10.0.0.7:8080/", "http://[fd00::7]/"]) expect(refusal(url, policy), url).toBeNull();
    expect(refusal("http://svc.internal/", policy)).toBe("svc.internal is an internal name (.internal)");
    expect(refusal("http://10.0.0.8/", policy)).toBe("10.0.0.8 is a private address");
    expect(refusal("http://other.corp/", policy)).toBe("other.corp is an internal name (.corp)");
  });

  it("a malformed setting stops the deployment at once, naming it", () => {
    expect(DEFAULTS).toMatchObject({ outboundAllowLoopback: false, outboundAllowHosts: [] });
    expect(loadConfig({ OUTBOUND_ALLOW_LOOPBACK: "true" }).outboundAllowLoopback).toBe(true);
    expect(() => loadConfig({ OUTBOUND_ALLOW_LOOPBACK: "yes" })).toThrow(/OUTBOUND_ALLOW_LOOPBACK must be true or false/);
    for (const bad of ["ghe.corp:8443", "https://ghe.corp", "a b", "ghe.corp/api", "::1"]) {
      expect(() => loadConfig({ OUTBOUND_ALLOW_HOSTS: bad }), bad).toThrow(/OUTBOUND_ALLOW_HOSTS/);
    }
  });
});

/** A fetch that answers from `routes` by URL and records what it was asked. */
function fakeFetch(routes: Record<string, () => Response>) {
  const asked: { url: string; method: string; authorization: string | null; body: string | null }[] = [];
  const impl = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input);
    const headers = new Headers(init?.headers);
    asked.push({ url, method: init?.method ?? "GET", authorization: headers.get("authorization"), body: (init?.body as string | undefined) ?? null });
    return (routes[url] ?? (() => new Response("not found", { status: 404 })))();
  }) as typeof fetch;
  return { impl, asked };
}

const redirect = (status: number, location: string) => () => new Response(null, { status, headers: { location } });

describe("fetchOutbound", () => {
  const init = { method: "POST", body: "{}", headers: { authorization: "token t", "content-type": "application/json" } };

  it("sends nothing to a refused URL", async () => {
    const { impl, asked } = fakeFetch({});
    await expect(fetchOutbound(STRICT, "http://10.0.0.1/", init, { redirectsMax: 3, fetchImpl: impl })).rejects.toBeInstanceOf(OutboundRefused);
    expect(asked).toEqual([]);
  });

  it("with no redirects allowed, a redirect is the answer and its target is never asked", async () => {
    const { impl, asked } = fakeFetch({ "https://a.example.com/": redirect(302, "https://b.example.com/") });
    const res = await fetchOutbound(STRICT, "https://a.example.com/", init, { redirectsMax: 0, fetchImpl: impl });
    expect(res.status).toBe(302);
    expect(asked.map((a) => a.url)).toEqual(["https://a.example.com/"]);
  });

  it("a redirect to a refused address is not followed", async () => {
    const { impl, asked } = fakeFetch({ "https://a.example.com/": redirect(307, "http://169.254.169.254/latest/meta-data/") });
    const refused = fetchOutbound(STRICT, "https://a.example.com/", init, { redirectsMax: 3, fetchImpl: impl });
    await expect(refused).rejects.toThrow("169.254.169.254 is a link-local address");
    expect(asked.map((a) => a.url)).toEqual(["https://a.example.com/"]);
  });

  it("follows at most redirectsMax redirects, keeps credentials on one origin and drops them on another, and turns a 303 into a GET", async () => {
    const { impl, asked } = fakeFetch({
      "https://a.example.com/1": redirect(308, "/2"),
      "https://a.example.com/2": redirect(303, "https://b.example.com/3"),
      "https://b.example.com/3": redirect(301, "https://b.example.com/4"),
    });
    const res = await fetchOutbound(STRICT, "https://a.example.com/1", init, { redirectsMax: 2, fetchImpl: impl });
    expect(res.status).toBe(301);
    expect(asked).toEqual([
      { url: "https://a.example.com/1", method: "POST", authorization: "token t", body: "{}" },
      { url: "https://a.example.com/2", method: "POST", authorization: "token t", body: "{}" },
      { url: "https://b.example.com/3", method: "GET", authorization: null, body: null },
    ]);
  });
});
