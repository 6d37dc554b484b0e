// Completion callbacks are signed so a receiver can tell they came from Docket and were not
// replayed long after: HMAC-SHA256 with the organization's callback_secret over `<t>.<raw body>`,
// sent as `Docket-Signature: t=<ms>,v1=<hex>` (docs/callbacks.md shows how to verify it). During a
// secret rotation's overlap window the header carries one `v1` per secret, the new one first.

import { hmacSha256Hex } from "../lib/crypto";

export const SIGNATURE_HEADER = "Docket-Signature";

/** The Docket-Signature header value for `body` sent at `tMs`, signed with each of `secrets`. */
export async function signatureHeader(secrets: string[], body: string, tMs: number): Promise<string> {
  const macs = await Promise.all(secrets.map((secret) => hmacSha256Hex(secret, `${tMs}.${body}`)));
  return [`t=${tMs}`, ...macs.map((mac) => `v1=${mac}`)].join(",");
}
