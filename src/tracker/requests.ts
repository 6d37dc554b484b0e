// The tracker's side of what a run asks of its ticket (src/run/ticket-requests.ts): which kinds an
// event's data may name, and the marker each comment carries (docs/protocol.md, "Tracker deliveries").
// src/tracker/deliver.ts performs the request.

import { DELIVERY_KINDS, type DeliveryKind } from "../run/ticket-requests";

export function isDeliveryKind(value: unknown): value is DeliveryKind {
  return (DELIVERY_KINDS as readonly unknown[]).includes(value);
}

/**
 * The hidden marker every comment carries, so a crash after posting and before the receipt finds
 * the comment instead of posting it twice. A run blocked again in a later attempt gets a new
 * comment: its marker names that attempt.
 */
export function deliveryMarker(runId: string, kind: DeliveryKind, attempt?: number): string {
  return `<!-- docket:run=${runId}:kind=${kind}${attempt && attempt > 1 ? `:attempt=${attempt}` : ""} -->`;
}
