// Completion callbacks are signed so a receiver can tell they came from Docket and were not
// replayed long after: HMAC-SHA256 with the organization's callback_secret over `<t>.<raw body>`,
// sent as `Docket-Signature: t=<ms>,v1=<hex>` (docs/callbacks.md shows how to verify it).

import { hmacSha256Hex } from "../lib/crypto";

export const SIGNATURE_HEADER = "Docket-Signature";

/** The Docket-Signature header value for `body` sent at `tMs`. */
export async function signatureHeader(secret: string, body: string, tMs: number): Promise<string> {
  return `t=${tMs},v1=${await hmacSha256Hex(secret, `${tMs}.${body}`)}`;
}
