// Tokens are random, shown once, and stored as SHA-256 hashes (docs/protocol.md).

const encoder = new TextEncoder();

/** Two hex digits for each byte value: every request hashes a token, so the encoding is a lookup. */
const HEX_BYTES = Array.from({ length: 256 }, (_v, b) => b.toString(16).padStart(2, "0"));

function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += HEX_BYTES[b];
  return out;
}

export function randomHex(bytes: number): string {
  return hex(crypto.getRandomValues(new Uint8Array(bytes)));
}

export async function sha256Hex(text: string): Promise<string> {
  return hex(new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text))));
}

export async function hmacSha256Hex(secret: string, body: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return hex(new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(body))));
}

/**
 * Constant-time comparison of two strings of hex or secret text, by the runtime's
 * crypto.subtle.timingSafeEqual, which throws on inputs of different lengths: those are unequal.
 */
export function timingSafeEqual(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  return x.byteLength === y.byteLength && crypto.subtle.timingSafeEqual(x, y);
}

export const TOKEN_PREFIX = {
  member: "dkt_m_",
  registration: "dkt_r_",
  machine: "dkt_s_",
  attempt: "dkt_a_",
} as const;

export function newToken(kind: keyof typeof TOKEN_PREFIX): string {
  return TOKEN_PREFIX[kind] + randomHex(32);
}

export function newId(prefix: string): string {
  return `${prefix}_${randomHex(12)}`;
}
