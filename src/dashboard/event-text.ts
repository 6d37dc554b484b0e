// A run's event in words, as a run's page lists it ("attempt 2 claimed by machine builder-1",
// "phase: implementing", the agent's output lines): what each type's data means, read from the
// fields docs/protocol.md ("Events") gives it. A type this does not know reads as its name.

import { at, cents } from "./layout";

type Data = Record<string, any>;

const EVENT_TEXT: Record<string, (d: Data) => string> = {
  "run.created": () => "dispatched: queued for a runner",
  "run.state": stateText,
  "run.phase": (d) => `phase: ${d.phase ?? "none"}`,
  "run.output": (d) => `output:\n${(d.lines as string[] | undefined)?.join("\n") ?? ""}`,
  "run.artifact": (d) => `result reported: ${d.empty ? "an empty patch (no changes)" : "a patch"}${d.cost_cents == null ? "" : `, cost ${cents(d.cost_cents)}`}`,
  "run.stop_requested": (d) => `stop requested by ${d.by}${d.reason ? `: ${d.reason}` : ""}`,
  "run.pause_requested": (d) => `pause requested${d.hold ? " (held until resumed)" : ""}${d.reason ? `: ${d.reason}` : ""}`,
  "run.checkpoint": (d) => `checkpoint stored: phase ${d.last_phase ?? "unknown"}, a patch of ${d.patch_chars} characters${d.note ? ` (${d.note})` : ""}`,
  "run.publication": publicationText,
  "run.recovered": (d) => `recovery after ${at(d.recovery_at_ms)}: ${d.observed}${d.problem ? `, problem: ${d.problem}` : ""}`,
  "run.tracker_delivery": (d) => `tracker delivery queued: ${String(d.kind).replaceAll("_", " ")} on ${d.ticket_key}`,
};

function stateText(d: Data): string {
  // A claim names its attempt and machine in its reason ("claimed by machine …").
  if (d.to === "claimed") return `attempt ${d.attempt} ${d.reason}`;
  return `state: ${d.from} → ${d.to} (${d.reason})`;
}

function publicationText(d: Data): string {
  if (d.step === "intent") return `publication: intends to push branch ${d.branch}`;
  if (d.step === "pushed") return `publication: branch ${d.branch} pushed at ${d.head_sha}`;
  if (d.step === "retry") return `publication: the pull-request step failed (try ${d.tries}): ${d.error}; next try ${at(d.next_try_at_ms)}`;
  return `publication: ${d.step}`;
}

/** What one event says, in words; the attempt it happened in is said once, by the caller. */
export function eventText(type: string, data: Data): string {
  return EVENT_TEXT[type]?.(data) ?? type;
}
