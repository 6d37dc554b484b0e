// Human readiness in Linear's terms (../shared/spec/run-lifecycle.md, "Human readiness
// authorization"; src/autopilot/readiness.ts stays the rule): an issue history entry names the
// user who made the change (`actor`) and, when an OAuth application, an integration or an
// automation made it, that bot (`botActor`). An app's own user (`app`) is not a person either.
// A change made with a person's personal API key names that person and nothing else: Linear
// cannot tell it from their own hand, so admission rests on the trusted-actor assumption for
// those keys (docs/autopilot.md, "Linear").

import type { ActorEvidence, ReadyEvidence } from "../provider";
import type { HistoryNode } from "./queries";

/** Who made a history entry's change, as readiness judges actors; null when Linear names no one. */
export function actorOfHistory(entry: Pick<HistoryNode, "actor" | "botActor">): ActorEvidence | null {
  const bot = entry.botActor;
  const user = entry.actor;
  if (!user && !bot) return null;
  if (!user) return { login: bot!.name ?? bot!.type, type: "Bot", viaApp: bot!.name ?? bot!.type };
  return { login: user.displayName, type: user.app ? "App" : "User", viaApp: bot ? (bot.name ?? bot.type) : null };
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/** Whether the entry made the issue ready: added the ready label, or moved it to the ready state. */
function madeReady(entry: HistoryNode, marker: { label: string | null; state: string | null }): boolean {
  if (marker.state) return entry.toState !== null && same(entry.toState.name, marker.state);
  return (entry.addedLabels ?? []).some((l) => same(l.name, marker.label!));
}

/** Whether the entry changed what admission judges: the labels or the state. */
function changedReadiness(entry: HistoryNode): boolean {
  return (entry.addedLabels?.length ?? 0) > 0 || (entry.removedLabels?.length ?? 0) > 0 || entry.toState !== null;
}

/** The latest ready transition and the latest change of labels or state, from the history read. */
export function readyEvidenceOf(history: HistoryNode[], marker: { label: string | null; state: string | null }): ReadyEvidence {
  let transition: ReadyEvidence["transition"] = null;
  let lastChangeAtMs: number | null = null;
  for (const entry of history) {
    const atMs = Date.parse(entry.createdAt);
    if (changedReadiness(entry)) lastChangeAtMs = Math.max(lastChangeAtMs ?? atMs, atMs);
    if (madeReady(entry, marker) && (!transition || atMs >= transition.atMs)) {
      transition = { eventId: `linear-history:${entry.id}`, atMs, actor: actorOfHistory(entry) };
    }
  }
  return { transition, lastChangeAtMs };
}
