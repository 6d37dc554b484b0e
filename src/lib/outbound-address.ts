// Where Docket sends requests a tenant names (a run's callback_url, an autopilot project's
// github.api_url): never to a loopback, private, shared (CGNAT), link-local or unique-local address,
// never to a bare IP address, and never to a name that only resolves inside a network (localhost,
// *.local, *.internal, …), unless the operator allows it (OUTBOUND_ALLOW_LOOPBACK,
// OUTBOUND_ALLOW_HOSTS). The same check runs when the URL is given and again before every request,
// redirects included, so a URL stored before a setting changed is refused too
// (../shared/DESIGN.md, "Invariants", 8).
//
// The host is judged as written (the URL parser has already put 0x7f.1 or 2130706433 into dotted
// form): a Worker cannot resolve names itself, which is why bare addresses are refused outright.

import { DocketError } from "../errors";

export interface OutboundPolicy {
  /** localhost, *.localhost, 127.0.0.0/8 and [::1] are allowed (a local run). */
  allowLoopback: boolean;
  /** Hosts allowed whatever they are: a name or an address as a URL spells it, or `*.suffix` for every name under it. */
  allowHosts: readonly string[];
}

/** The deployment's settings the policy is made of (src/config.ts parses them with parseAllowHosts below). */
export interface OutboundSettings {
  outboundAllowLoopback: boolean;
  outboundAllowHosts: readonly string[];
}

export function outboundPolicy(config: OutboundSettings): OutboundPolicy {
  return { allowLoopback: config.outboundAllowLoopback, allowHosts: config.outboundAllowHosts };
}

/**
 * Names that resolve only inside a network: RFC 6761 (localhost), RFC 6762 (local, and the private
 * suffixes its appendix G lists), RFC 8375 (home.arpa), ICANN's private-use `internal`.
 */
const INTERNAL_SUFFIXES = ["local", "localdomain", "internal", "intranet", "private", "corp", "home", "lan", "home.arpa"];

/** IPv4 ranges no tenant's request goes to: [first octets as a number, prefix length, what it is]. */
const IPV4_RANGES: [number, number, string][] = [
  [0x7f000000, 8, "a loopback address"],
  [0x0a000000, 8, "a private address"],
  [0xac100000, 12, "a private address"],
  [0xc0a80000, 16, "a private address"],
  [0x64400000, 10, "a shared (carrier-grade NAT) address"],
  [0xa9fe0000, 16, "a link-local address"],
  [0x00000000, 8, "an unspecified address"],
];

type HostKind = { loopback: boolean; what: string } | null;

/** A host as the URL parser leaves it, lower-case, without a trailing dot. */
function bareHost(url: URL): string {
  return url.hostname.toLowerCase().replace(/\.$/, "");
}

function ipv4Kind(host: string): HostKind {
  const octets = host.split(".").map(Number);
  const value = ((octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]) >>> 0;
  for (const [base, bits, what] of IPV4_RANGES) {
    if (value >>> (32 - bits) === base >>> (32 - bits)) return { loopback: what === "a loopback address", what };
  }
  return { loopback: false, what: "a bare IP address" };
}

/** The eight 16-bit groups of a bracketed IPv6 host as the URL parser writes it (hex, `::` allowed). */
function ipv6Groups(host: string): number[] {
  const [head, tail] = host.slice(1, -1).split("::");
  const parse = (part: string | undefined) => (part ? part.split(":").map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  return tail === undefined ? left : [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
}

function ipv6Kind(host: string): HostKind {
  const g = ipv6Groups(host);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeros(7) && g[7] === 1) return { loopback: true, what: "a loopback address" };
  // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) addresses are the IPv4 address inside.
  if ((zeros(5) && g[5] === 0xffff) || (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0))) {
    const inner = ipv4Kind(v4(g[6], g[7]));
    return inner && { loopback: inner.loopback, what: `an IPv4-mapped IPv6 address (${inner.what})` };
  }
  if ((g[0] & 0xffc0) === 0xfe80) return { loopback: false, what: "a link-local address" };
  if ((g[0] & 0xfe00) === 0xfc00) return { loopback: false, what: "a unique-local address" };
  return { loopback: false, what: "a bare IP address" };
}

function nameKind(host: string): HostKind {
  if (host === "localhost" || host.endsWith(".localhost")) return { loopback: true, what: "a loopback name" };
  if (!host.includes(".")) return { loopback: false, what: "a name without a domain" };
  const suffix = INTERNAL_SUFFIXES.find((s) => host.endsWith(`.${s}`));
  return suffix ? { loopback: false, what: `an internal name (.${suffix})` } : null;
}

/** What a host is when Docket must not reach it by default, or null for a public name. */
function hostKind(host: string): HostKind {
  if (host.startsWith("[")) return ipv6Kind(host);
  if (/^\d+\.\d+\.\d+\.\d+$/.test(host)) return ipv4Kind(host);
  return nameKind(host);
}

/** Whether the URL's host is loopback (localhost, 127.0.0.0/8, [::1]), whatever the policy. */
export function isLoopbackUrl(url: URL): boolean {
  return hostKind(bareHost(url))?.loopback ?? false;
}

function allowedByName(host: string, allowHosts: readonly string[]): boolean {
  return allowHosts.some((entry) => (entry.startsWith("*.") ? host.endsWith(entry.slice(1)) : host === entry));
}

/** Why Docket will not send a request to `url` under `policy`, or null when it may. */
export function outboundRefusal(url: URL, policy: OutboundPolicy): string | null {
  if (url.protocol !== "https:" && url.protocol !== "http:") return `${url.protocol} is not http or https`;
  const host = bareHost(url);
  if (allowedByName(host, policy.allowHosts)) return null;
  const kind = hostKind(host);
  if (!kind || (kind.loopback && policy.allowLoopback)) return null;
  return `${host} is ${kind.what}`;
}

/**
 * Refuses, as 400 invalid_request naming `field`, a URL Docket will not send requests to under the
 * deployment's policy.
 */
export function checkOutboundUrl(config: OutboundSettings, field: string, text: string): void {
  const reason = outboundRefusal(new URL(text), outboundPolicy(config));
  if (reason === null) return;
  throw new DocketError(
    "invalid_request",
    `body ${field}: ${reason}; Docket sends no requests to loopback, private, link-local or internal hosts or to bare IP addresses (an operator allows a host with OUTBOUND_ALLOW_HOSTS)`,
    { field },
  );
}

/** Parses OUTBOUND_ALLOW_HOSTS: comma-separated hosts as a URL spells them, or `*.suffix`; a malformed entry throws. */
export function parseAllowHosts(text: string): string[] {
  return text
    .split(",")
    .map((entry) => entry.trim().toLowerCase())
    .filter(Boolean)
    .map((entry) => {
      const wildcard = entry.startsWith("*.");
      let url: URL | null = null;
      try {
        url = new URL(`http://${wildcard ? entry.slice(2) : entry}/`);
      } catch {
        // Reported below with every other malformed entry.
      }
      if (!url || url.host !== url.hostname || url.pathname !== "/" || url.username || url.search || url.hash) {
        throw new Error(`OUTBOUND_ALLOW_HOSTS: ${JSON.stringify(entry)} is not a host name, an address ([::1] for IPv6) or *.suffix`);
      }
      return `${wildcard ? "*." : ""}${bareHost(url)}`;
    });
}

/** A request to a refused address: nothing was sent. */
export class OutboundRefused extends Error {
  constructor(readonly reason: string) {
    super(`refused to send a request: ${reason}`);
    this.name = "OutboundRefused";
  }
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/**
 * The request a redirect makes, as fetch would (WHATWG Fetch, "HTTP-redirect fetch"): 303, and
 * 301/302 after a POST, become a GET without a body; credentials never follow to another origin.
 */
function redirectedInit(init: RequestInit, status: number, from: URL, to: URL): RequestInit {
  const headers = new Headers(init.headers);
  if (from.origin !== to.origin) headers.delete("authorization");
  const method = (init.method ?? "GET").toUpperCase();
  if ((status === 303 && method !== "GET" && method !== "HEAD") || ((status === 301 || status === 302) && method === "POST")) {
    for (const name of ["content-type", "content-length"]) headers.delete(name);
    return { ...init, method: "GET", body: undefined, headers };
  }
  return { ...init, headers };
}

/**
 * fetch to a URL the policy allows, else OutboundRefused before anything is sent. At most
 * `redirectsMax` redirects are followed, each target checked the same way; the redirect past them
 * (with 0, the first) comes back as the answer, for the caller to treat as a failure.
 */
export async function fetchOutbound(
  policy: OutboundPolicy,
  target: string | URL,
  init: RequestInit,
  options: { redirectsMax: number; fetchImpl?: typeof fetch },
): Promise<Response> {
  const fetchImpl = options.fetchImpl ?? ((input, requestInit) => fetch(input, requestInit));
  let url = new URL(target);
  let request = init;
  for (let hop = 0; ; hop++) {
    const reason = outboundRefusal(url, policy);
    if (reason !== null) throw new OutboundRefused(reason);
    const res = await fetchImpl(url.href, { ...request, redirect: "manual" });
    const location = res.headers.get("location");
    if (!REDIRECT_STATUSES.has(res.status) || location === null || hop >= options.redirectsMax) return res;
    await res.body?.cancel();
    const next = new URL(location, url);
    request = redirectedInit(request, res.status, url, next);
    url = next;
  }
}
