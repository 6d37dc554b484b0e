// Headers calls read, described once so every operation that reads one documents the same rule.

import type { OperationSpec } from "./operation";

type Header = NonNullable<OperationSpec["headers"]>[number];

/**
 * The Idempotency-Key of a call that creates something (docs/protocol.md, "Idempotency"): one rule
 * for every endpoint that takes it; `holds` says how long a key names what it made there.
 */
export function idempotencyKeyHeader(holds: string): Header {
  return {
    name: "Idempotency-Key",
    description:
      "Optional; 1–200 printable ASCII characters without spaces (else 400 invalid_request, field Idempotency-Key). " +
      "The first call with a key answers 201; the same key with the same payload answers 200 with the same thing and makes nothing new; " +
      `the same key with another payload is 409 idempotency_conflict. Keys are per organization; ${holds}`,
  };
}

/**
 * x-d1-bookmark on the calls served through a D1 session (docs/protocol.md, "Read your own
 * writes"): taken on the request, returned on the answer.
 */
export function bookmarkHeader(): Header {
  return {
    name: "x-d1-bookmark",
    description:
      "Optional; the x-d1-bookmark of an earlier answer (dash-separated hex groups, else 400 invalid_request, field x-d1-bookmark). " +
      "The D1 reads of this call then see at least what that call saw or wrote, even when a read replica answers. " +
      "The answer carries x-d1-bookmark too: send the latest one on the next call.",
  };
}
