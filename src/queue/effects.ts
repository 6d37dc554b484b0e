// Side effects of run events, performed by the outbox consumer after the event is stored once.
// Each handler must be idempotent: the Queue delivers at least once, in any order.

import { settleBuildOnRunEvent } from "../builds/settle";
import { scheduleCompletionCallback } from "../callbacks/schedule";
import type { Env, OutboxMessage } from "../env";

export type EventHandler = (env: Env, event: OutboxMessage) => Promise<void>;

/** Every side effect of a stored event, in order. A handler that throws makes the message retry. */
export const EVENT_HANDLERS: EventHandler[] = [
  // A build job settles when its run ends (src/builds/settle.ts).
  settleBuildOnRunEvent,
  // A run's terminal event starts its completion callback (src/callbacks/schedule.ts).
  scheduleCompletionCallback,
];

export async function performEffects(env: Env, event: OutboxMessage): Promise<void> {
  for (const handler of EVENT_HANDLERS) await handler(env, event);
}
