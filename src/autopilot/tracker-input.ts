// From a create or change request's tracker settings to the stored columns (src/autopilot/tracker-config.ts):
// the rules between fields the schema cannot state, the Linear API key encrypted, and the key of
// what the project watches. Each refusal names its field and changes nothing.

import type { Env } from "../env";
import { DocketError } from "../errors";
import type { CreateAutopilotProjectBody, TrackerChange, UpdateAutopilotProjectBody } from "../protocol/autopilot";
import type { AutopilotProjectRow } from "./projects";
import { encryptSecret } from "./secrets";
import { GITHUB_TRACKER, LINEAR_DEFAULTS, parseTracker, watchedKey, type LinearTracker, type TrackerConfig } from "./tracker-config";

type TrackerColumns = Pick<AutopilotProjectRow, "provider" | "repositoryKey" | "tracker" | "trackerTokenEnc">;
type Body = (CreateAutopilotProjectBody | UpdateAutopilotProjectBody) & { provider?: "github" | "linear" };

/** Top-level fields that are GitHub Issues' own; a Linear project states them in `tracker` or has none. */
const GITHUB_ONLY: Record<string, string> = {
  ready_label: "a Linear project names its ready label in tracker.ready_label (or its ready state in tracker.ready_state)",
  review_label: "a Linear project names its review state in tracker.review_state",
  done_states: "a Linear project names its done workflow states in tracker.done_states",
  done_labels: "a Linear project has no done labels: a blocker is done by its workflow state",
  automation_accounts: "a Linear project names its automation accounts in tracker.automation_accounts",
};

const refuse = (field: string, why: string) => new DocketError("invalid_request", `body ${field}: ${why}`, { field });

/**
 * The tracker columns of a new project (`previous` null) or of a changed one. A change without
 * `tracker` keeps the stored settings and key; a Linear change may leave its api_key out only when
 * the project already holds one.
 */
export async function trackerColumns(env: Env, projectId: string, body: Body, repository: string, previous: AutopilotProjectRow | null): Promise<TrackerColumns> {
  if (body.provider && body.tracker && body.provider !== body.tracker.kind) throw refuse("provider", `must match tracker.kind (${body.tracker.kind})`);
  if (body.provider === "linear" && !body.tracker) throw refuse("tracker", "a Linear project needs its tracker settings (team, review_state, api_key)");
  const tracker = body.tracker ? trackerOf(body.tracker) : parseTracker(previous?.tracker);
  if (tracker.kind === "linear") for (const field of Object.keys(GITHUB_ONLY)) if (field in body) throw refuse(field, GITHUB_ONLY[field]);
  return {
    provider: tracker.kind,
    repositoryKey: watchedKey(repository, tracker),
    tracker: JSON.stringify(tracker),
    trackerTokenEnc: await tokenColumn(env, projectId, body.tracker, previous),
  };
}

function trackerOf(input: TrackerChange): TrackerConfig {
  if (input.kind === "github") return GITHUB_TRACKER;
  if (input.ready_label && input.ready_state) throw refuse("tracker.ready_state", "send ready_label or ready_state, not both");
  const readyState = input.ready_state ?? null;
  const readyLabel = readyState ? null : (input.ready_label ?? LINEAR_DEFAULTS.readyLabel);
  if (readyState && readyState.toLowerCase() === input.review_state.toLowerCase()) throw refuse("tracker.review_state", "must differ from ready_state");
  const tracker: LinearTracker = {
    kind: "linear",
    apiUrl: (input.api_url ?? LINEAR_DEFAULTS.apiUrl).replace(/\/+$/, ""),
    workspace: input.workspace,
    team: input.team.toUpperCase(),
    project: input.project ?? null,
    readyLabel,
    readyState,
    reviewState: input.review_state,
    doneStates: unique(input.done_states ?? []),
    automationAccounts: unique(input.automation_accounts ?? []),
  };
  return tracker;
}

/** Each name once, the first spelling kept; Linear compares names without case. */
function unique(values: readonly string[]): string[] {
  const seen = new Set<string>();
  return values.filter((v) => !seen.has(v.toLowerCase()) && seen.add(v.toLowerCase()));
}

async function tokenColumn(env: Env, projectId: string, input: TrackerChange | undefined, previous: AutopilotProjectRow | null): Promise<string> {
  if (!input) return previous?.trackerTokenEnc ?? "";
  if (input.kind === "github") return "";
  if (input.api_key !== undefined) return encryptSecret(env, projectId, "tracker_token", input.api_key);
  if (previous && previous.trackerTokenEnc !== "") return previous.trackerTokenEnc;
  throw refuse("tracker.api_key", "required: the project holds no Linear API key yet");
}
