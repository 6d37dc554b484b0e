// Side effects of run events, performed by the outbox consumer after the event is stored once.
// Each handler must be idempotent: the Queue delivers at least once, in any order.

import { settleRunBudgetOnRunEvent } from "../autopilot/run-budget";
import { tellTicketRunEnded } from "../autopilot/ticket-run-end";
import { settleBuildOnRunEvent } from "../builds/settle";
import { scheduleCompletionCallback } from "../callbacks/schedule";
import type { Env, OutboxMessage } from "../env";
import { requestTrackerDelivery } from "../tracker/deliver";

export type EventHandler = (env: Env, event: OutboxMessage) => Promise<void>;

/**
 * Every side effect of a stored event. Each runs even when another failed, so one stuck side
 * effect never holds back the others; any failure makes the message retry, and the handlers that
 * already succeeded do nothing the second time.
 */
export const EVENT_HANDLERS: EventHandler[] = [
  // A build job settles when its run ends (src/builds/settle.ts).
  settleBuildOnRunEvent,
  // A run's terminal event starts its completion callback (src/callbacks/schedule.ts).
  scheduleCompletionCallback,
  // An autopilot run's model-spend reservation settles when it ends (src/autopilot/run-budget.ts).
  settleRunBudgetOnRunEvent,
  // A run's request to its tracker ticket (comment, label) gets its receipt and first try (src/tracker/deliver.ts).
  requestTrackerDelivery,
  // An autopilot run's end is recorded on its ticket at once (src/autopilot/ticket-run-end.ts).
  tellTicketRunEnded,
];

export async function performEffects(env: Env, event: OutboxMessage): Promise<void> {
  const failures: unknown[] = [];
  for (const handler of EVENT_HANDLERS) {
    try {
      await handler(env, event);
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} side effects failed`);
}
