// Side effects of run events, performed by the outbox consumer after the event is stored once.
// Each handler must be idempotent: the Queue delivers at least once, in any order.

import { settleRunBudgetOnRunEvent } from "../autopilot/run-budget";
import { tellTicketRunEnded } from "../autopilot/ticket-run-end";
import { settleBuildOnRunEvent } from "../builds/settle";
import { scheduleCompletionCallback } from "../callbacks/schedule";
import type { Env, OutboxMessage } from "../env";
import { terminalStateOf } from "../run/states";
import { requestTrackerDelivery } from "../tracker/deliver";
import { TRACKER_DELIVERY_EVENT } from "../run/ticket-requests";

export type EventHandler = (env: Env, event: OutboxMessage) => Promise<void>;

/** The fields of an event that say which side effects it has. */
type EventKind = Pick<OutboxMessage, "type" | "data">;

const endsRun = (event: EventKind) => terminalStateOf(event) !== null;
const asksTracker = (event: EventKind) => event.type === TRACKER_DELIVERY_EVENT;

/**
 * Every side effect of a stored event, and the events it acts on. Only these events need the
 * consumer: the others are stored by the run object itself where it can (a claim's,
 * durable-objects/outbox.ts, split()), so a handler for any other event widens its `when`.
 */
export const EVENT_EFFECTS: { when: (event: EventKind) => boolean; perform: EventHandler }[] = [
  // A build job settles when its run ends (src/builds/settle.ts).
  { when: endsRun, perform: settleBuildOnRunEvent },
  // A run's terminal event starts its completion callback (src/callbacks/schedule.ts).
  { when: endsRun, perform: scheduleCompletionCallback },
  // An autopilot run's model-spend reservation settles when it ends (src/autopilot/run-budget.ts).
  { when: endsRun, perform: settleRunBudgetOnRunEvent },
  // A run's request to its tracker ticket (comment, label) gets its receipt and first try (src/tracker/deliver.ts).
  { when: asksTracker, perform: requestTrackerDelivery },
  // An autopilot run's end is recorded on its ticket at once (src/autopilot/ticket-run-end.ts).
  { when: endsRun, perform: tellTicketRunEnded },
];

/** Whether the consumer has work for this event beyond storing it. */
export function hasEffects(event: EventKind): boolean {
  return EVENT_EFFECTS.some((effect) => effect.when(event));
}

/**
 * Every side effect of a stored event. Each runs even when another failed, so one stuck side
 * effect never holds back the others; any failure makes the message retry, and the handlers that
 * already succeeded do nothing the second time.
 */
export async function performEffects(env: Env, event: OutboxMessage): Promise<void> {
  const failures: unknown[] = [];
  for (const effect of EVENT_EFFECTS) {
    if (!effect.when(event)) continue;
    try {
      await effect.perform(env, event);
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} side effects failed`);
}
