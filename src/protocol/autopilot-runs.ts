// An autopilot project's runs as one list (docs/protocol.md, "Autopilot runs"): each admitted run
// with its issue, its blocker's questions, its publication (the pull request) and its tracker
// deliveries, so a reader sees where every issue of the project stands without reading each run.

import { z } from "zod";
import { epochMs, keysetCursor, page, pageQuery, runId } from "./common.js";
import { RunBlocker, RunPublication, RunState, TrackerDelivery } from "./runs.js";

export const ListProjectRunsQuery = z
  .object({
    state: RunState.optional().describe("only runs in this state, such as blocked"),
    ...pageQuery(keysetCursor("run_[0-9a-f]{24}")),
  })
  .strict();

export const AutopilotProjectRun = z
  .object({
    id: runId,
    state: RunState,
    ticket: z.string().nullable().describe("the ticket that admitted the run, such as github:owner/repo#12 or linear:acme/ENG-12"),
    issue_url: z.string().nullable().describe("the issue in its tracker"),
    title: z.string().describe("the brief's first line (an admitted run's brief starts with its issue's title)"),
    last_error: z.string().nullable(),
    blocker: RunBlocker.nullable().describe("a blocked run's blocker: its summary, questions and the action a person must take"),
    publication: RunPublication.nullable().describe("its publication: the branch, the pull request once stored, the pull-request step's last error; null before one started"),
    deliveries: z.array(TrackerDelivery).describe("its tracker deliveries (blocker comment, review label, pull-request comment, failure comment), oldest first"),
    created_at_ms: epochMs,
    updated_at_ms: epochMs,
  })
  .meta({ id: "AutopilotProjectRun" });
export type AutopilotProjectRun = z.infer<typeof AutopilotProjectRun>;

export const AutopilotProjectRunPage = page("runs", AutopilotProjectRun);
