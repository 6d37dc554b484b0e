// Autopilot projects: a GitHub repository whose issues become runs once a person marks them ready
// (../shared/spec/run-lifecycle.md, "Admission" and "Human readiness authorization";
// docs/protocol.md, "Autopilot projects"; docs/autopilot.md).

import { z } from "zod";
import { BOUND_CEILINGS } from "./bounds.js";
import { epochMs, keysetCursor, page, pageQuery, prefixedId, runId } from "./common.js";
import { CreateRunBody, RunState } from "./runs.js";

export const autopilotProjectId = prefixedId("apj", "an autopilot project");

/** GitHub's closed-issue state reasons; a blocker closed with one of the configured ones is done. */
export const GITHUB_DONE_STATES = ["completed", "not_planned", "duplicate"] as const;

export const WEBHOOK_SECRET_MIN_CHARS = 16;
export const WEBHOOK_SECRET_MAX_CHARS = 256;

/** owner/name as GitHub spells them: an account name, a repository name (not . or ..). */
export const githubRepository = z
  .string()
  .max(140)
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/[A-Za-z0-9._-]{1,100}$/, "must be a GitHub repository like owner/name")
  .refine((r) => !/\/\.{1,2}$/.test(r), "must be a GitHub repository like owner/name");

/** A GitHub label name: GitHub allows up to 50 characters, spaces included, but no line breaks. */
export const githubLabel = z
  .string()
  .trim()
  .min(1)
  .max(50)
  .regex(/^[^\r\n\t]+$/, "a label has no line breaks or tabs");

/** A GitHub login; apps act as `<slug>[bot]`. */
export const githubLogin = z
  .string()
  .max(45)
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$/, "must be a GitHub login like octocat or my-app[bot]");

/** The heading of the issue body's Agent Brief section, without the leading #s. */
export const briefHeading = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .regex(/^[^#\r\n][^\r\n]*$/, "a heading's text, without the leading # and without line breaks");

/** A GitHub App's id or an installation's id: a positive number, sent as a string. */
export const githubNumericId = z.string().regex(/^[1-9][0-9]{0,19}$/, "must be a number like 123456, as a string");

/** A PEM private key, as GitHub hands out for an App (PKCS#1 RSA or PKCS#8). */
export const pemPrivateKey = z
  .string()
  .max(16_000)
  .regex(
    /^\s*-----BEGIN (RSA |EC )?PRIVATE KEY-----\r?\n[A-Za-z0-9+/=\r\n]+-----END \1PRIVATE KEY-----\s*$/,
    "must be a PEM private key (-----BEGIN RSA PRIVATE KEY----- … -----END RSA PRIVATE KEY-----)",
  );

/** The URL, or null when it is not one (zod runs refinements even after the URL check failed). */
function parsedUrl(text: string): URL | null {
  try {
    return new URL(text);
  } catch {
    return null;
  }
}

/**
 * GitHub's REST API root. The Worker also holds it to its outbound policy (src/lib/outbound-address.ts):
 * https to a public host, plain http only to a loopback stand-in where the deployment allows loopback.
 */
export const githubApiUrl = z
  .url({ protocol: /^https?$/ })
  .max(500)
  .refine((u) => {
    const url = parsedUrl(u);
    return !url || (!url.search && !url.hash);
  }, "must be a URL without a query or fragment");

export const webhookSecret = z.string().min(WEBHOOK_SECRET_MIN_CHARS).max(WEBHOOK_SECRET_MAX_CHARS);

const doneStates = z.array(z.enum(GITHUB_DONE_STATES)).max(GITHUB_DONE_STATES.length);
const doneLabels = z.array(githubLabel).max(BOUND_CEILINGS.labelsMax);
const automationAccounts = z.array(githubLogin).max(100);
const queueCapacity = z.number().int().min(1).max(BOUND_CEILINGS.autopilotQueueCapacityMax);

/** The run each admitted issue becomes: runner labels, priority and launch, as POST /v1/runs takes them. */
const repositoryUrl = CreateRunBody.shape.repository.unwrap().unwrap().shape.url.describe(
  "where runners clone the repository and push a run's branch (default: the issue's repository page, e.g. https://github.com/owner/name; a Linear project's: the GitHub repository's page)",
);

const runTemplate = z
  .object({
    labels: CreateRunBody.shape.labels,
    priority: CreateRunBody.shape.priority,
    launch: CreateRunBody.shape.launch,
    repository_url: repositoryUrl.optional(),
  })
  .strict();

const projectName = z.string().trim().min(1).max(100);

/** A Linear workflow state's or label's name, as a team's settings show it. */
const linearName = z
  .string()
  .trim()
  .min(1)
  .max(80)
  .regex(/^[^\r\n\t]+$/, "a name has no line breaks or tabs");

/** Linear's credential: a personal API key (lin_api_…) or an OAuth application's access token. */
const linearApiKey = z.string().trim().min(10).max(500).regex(/^[\x21-\x7e]+$/, "must be a Linear API key or OAuth token, without spaces");

/** The tracker a project's issues come from; its runs' branches and pull requests always go to the GitHub repository. */
const GitHubTrackerInput = z.object({ kind: z.literal("github") }).strict();

const linearTrackerFields = {
  kind: z.literal("linear"),
  api_url: githubApiUrl.optional().describe("Linear's GraphQL endpoint (default https://api.linear.app/graphql), held to the same outbound policy as github.api_url"),
  workspace: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, "must be the workspace's URL key, as in linear.app/<workspace>").describe("the workspace's URL key (linear.app/<workspace>)"),
  team: z.string().regex(/^[A-Za-z0-9_]{1,16}$/, "must be the team's key, as its issue identifiers start (ENG in ENG-12)").describe("the team's key (ENG in ENG-12)"),
  project: z.uuid().nullable().optional().describe("only issues of this Linear project (its id); default: the whole team"),
  ready_label: linearName.nullable().optional().describe('the label a person adds to mark an issue ready (default "ready" unless ready_state is set)'),
  ready_state: linearName.nullable().optional().describe("or: the workflow state a person moves an issue to, to mark it ready"),
  review_state: linearName.describe('the workflow state a published run\'s issue moves to (e.g. "In Review")'),
  done_states: z.array(linearName).max(50).optional().describe("workflow states that count a blocker as done besides those of type completed (default none)"),
  automation_accounts: z.array(z.string().trim().min(1).max(100)).max(100).optional().describe("Linear users (by display name) never taken for a person (default none)"),
};

const LinearTrackerInput = z
  .object({ ...linearTrackerFields, api_key: linearApiKey.describe("a Linear API key or OAuth access token Docket reads and writes with; never shown again") })
  .strict();

const TrackerInput = z.discriminatedUnion("kind", [GitHubTrackerInput, LinearTrackerInput]);

/** A change of the tracker replaces its settings; a Linear project already holding a key may leave api_key out. */
const TrackerChange = z.discriminatedUnion("kind", [GitHubTrackerInput, LinearTrackerInput.extend({ api_key: linearApiKey.optional() })]);
export type TrackerChange = z.infer<typeof TrackerChange>;

export const CreateAutopilotProjectBody = z
  .object({
    name: projectName,
    provider: z.enum(["github", "linear"]).optional().describe("the tracker's kind; must match tracker.kind when both are sent (default github)"),
    tracker: TrackerInput.optional().describe('where the issues come from: {"kind":"github"} (the default: the repository\'s issues) or a Linear team'),
    repository: githubRepository.describe("the GitHub repository runs push their branches to and open pull requests on (and, for GitHub Issues, the issues' repository)"),
    ready_label: githubLabel.optional().describe('the label a person adds to mark an issue ready (default "ready")'),
    review_label: githubLabel.optional().describe('the label for issues whose run awaits review (default "needs-review")'),
    brief_heading: briefHeading.optional().describe('the heading of the issue body\'s Agent Brief section (default "Agent Brief")'),
    done_states: doneStates.optional().describe('closed state reasons that make a blocker done (default ["completed"])'),
    done_labels: doneLabels.optional().describe("labels that make a blocker done even while open (default none)"),
    queue_capacity: queueCapacity.optional().describe("admitted waiting runs at most (default 10, at most AUTOPILOT_QUEUE_CAPACITY_MAX)"),
    automation_accounts: automationAccounts.optional().describe("logins never taken for a person (default none)"),
    trusted_actor_assumption: z.boolean().optional().describe("accept a User sender without timeline evidence against it (default false)"),
    run: runTemplate,
    webhook_secret: webhookSecret.describe("the secret the tracker signs deliveries with (GitHub's webhook secret, or the Linear webhook's signing secret); never shown again"),
    github: z
      .object({
        api_url: githubApiUrl
          .optional()
          .describe("GitHub's REST API root (default https://api.github.com): https to a public host; loopback, private, internal and bare-IP hosts are refused unless the deployment allows them (OUTBOUND_ALLOW_HOSTS; http only to loopback, with OUTBOUND_ALLOW_LOOPBACK)"),
        app_id: githubNumericId,
        installation_id: githubNumericId,
        private_key: pemPrivateKey.describe("the App's private key (PEM); never shown again"),
      })
      .strict(),
  })
  .strict();
export type CreateAutopilotProjectBody = z.infer<typeof CreateAutopilotProjectBody>;

/** A partial change: only the fields sent change; a secret sent replaces the stored one. */
export const UpdateAutopilotProjectBody = z
  .object({
    name: projectName.optional(),
    tracker: TrackerChange.optional().describe("replaces the tracker's settings"),
    repository: githubRepository.optional(),
    ready_label: githubLabel.optional(),
    review_label: githubLabel.optional(),
    brief_heading: briefHeading.optional(),
    done_states: doneStates.optional(),
    done_labels: doneLabels.optional(),
    queue_capacity: queueCapacity.optional(),
    automation_accounts: automationAccounts.optional(),
    trusted_actor_assumption: z.boolean().optional(),
    run: z
      .object({
        labels: CreateRunBody.shape.labels,
        priority: CreateRunBody.shape.priority,
        launch: CreateRunBody.shape.launch.optional(),
        repository_url: repositoryUrl.nullable().optional(),
      })
      .strict()
      .optional(),
    webhook_secret: webhookSecret.optional(),
    github: z
      .object({
        api_url: githubApiUrl.optional(),
        app_id: githubNumericId.optional(),
        installation_id: githubNumericId.optional(),
        private_key: pemPrivateKey.optional(),
      })
      .strict()
      .optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, "name at least one field to change");
export type UpdateAutopilotProjectBody = z.infer<typeof UpdateAutopilotProjectBody>;

export const ListAutopilotProjectsQuery = z.object(pageQuery(keysetCursor("apj_[0-9a-f]{24}"))).strict();

export const AutopilotProjectPath = z.object({ id: autopilotProjectId });

// ---- answers -------------------------------------------------------------------------------------

/** An autopilot project as every answer shows it: its configuration, never its secrets. */
export const AutopilotProject = z
  .object({
    id: autopilotProjectId,
    org_id: z.string(),
    name: z.string(),
    provider: z.enum(["github", "linear"]).describe("the tracker's kind"),
    tracker: z.discriminatedUnion("kind", [
      z.object({ kind: z.literal("github") }),
      z.object({
        kind: z.literal("linear"),
        api_url: z.string(),
        workspace: z.string(),
        team: z.string(),
        project: z.string().nullable(),
        ready_label: z.string().nullable(),
        ready_state: z.string().nullable(),
        review_state: z.string(),
        done_states: z.array(z.string()),
        automation_accounts: z.array(z.string()),
        api_key_set: z.boolean().describe("a Linear API key is stored (it is never shown)"),
      }),
    ]),
    repository: z.string().describe("owner/name: the GitHub repository runs push to and open pull requests on"),
    ready_label: z.string(),
    review_label: z.string(),
    brief_heading: z.string(),
    done_states: z.array(z.enum(GITHUB_DONE_STATES)),
    done_labels: z.array(z.string()),
    queue_capacity: z.number().int(),
    automation_accounts: z.array(z.string()),
    trusted_actor_assumption: z.boolean(),
    run: z.object({
      labels: z.array(z.string()),
      priority: z.number().int(),
      launch: z.object({ protocol: z.string(), command: z.array(z.string()), image: z.string().nullable(), env: z.record(z.string(), z.string()) }),
      repository_url: z.string().nullable().describe("where runners clone and push; null: the issue's repository page"),
    }),
    webhook: z.object({
      url: z.string().describe("where the tracker delivers this project's webhooks (GitHub: issues, issue_comment, issue_dependencies; Linear: its own door, docs/autopilot.md)"),
      secret_set: z.boolean().describe("a webhook secret is stored (it is never shown)"),
    }),
    github: z.object({
      api_url: z.string(),
      app_id: z.string(),
      installation_id: z.string(),
      private_key_set: z.boolean().describe("a private key is stored (it is never shown)"),
    }),
    created_at_ms: epochMs,
    updated_at_ms: epochMs,
  })
  .meta({ id: "AutopilotProject" });
export type AutopilotProjectAnswer = z.infer<typeof AutopilotProject>;

/** Why a door could not read GitHub: a project's last error, and a ticket's (docs/protocol.md, "Autopilot admission"). */
const TrackerLastError = z.object({
  at_ms: epochMs,
  door: z.enum(["webhook", "reconcile", "startup", "operator"]).describe("which door could not read GitHub"),
  failure: z.string().describe("why: unavailable (no connection, or a 5xx), timeout, unauthorized (the App's credentials refused), forbidden, rate_limited, too_many_pages, or error"),
  message: z.string(),
});

/**
 * A project read on its own, with what its GitHub traffic costs and where its reconciliation
 * stands (docs/autopilot.md, "GitHub's rate limit").
 */
export const AutopilotProjectDetail = AutopilotProject.extend({
  github_budget: z.object({
    requests_last_hour: z.number().int().describe("requests of this project GitHub counted in the last hour (a 304 answer to a conditional read is not counted)"),
    rate_limit: z
      .object({
        remaining: z.number().int(),
        limit: z.number().int(),
        reset_at_ms: epochMs.nullable().describe("when the installation's budget is whole again; null when GitHub did not say"),
      })
      .nullable()
      .describe("the installation's rate limit as GitHub last stated it (shared by every project on the installation); null before any request"),
    reserve: z.number().int().describe("AUTOPILOT_GITHUB_RESERVE: under this many remaining requests reconciliation pauses; webhooks and publication go on"),
  }),
  reconciliation: z.object({
    state: z.enum(["running", "paused"]),
    paused_reason: z.string().nullable().describe("why the last tick did not reconcile the project (the installation's budget under its reserve, or its scheduler disabled or draining)"),
    pass: z.enum(["full", "changed"]).nullable().describe("the pass under way: every ready issue, or those changed since the last pass began; null between passes"),
    last_full_pass_finished_at_ms: epochMs.nullable().describe("when the last pass over every ready issue finished; null before the first"),
  }),
  last_error: TrackerLastError.extend({
    number: z.number().int().nullable().describe("the issue the door was reading, when it read one"),
  })
    .nullable()
    .describe("the last time a door could not read GitHub for this project, and why; null once a later read succeeded"),
}).meta({ id: "AutopilotProjectDetail" });
export type AutopilotProjectDetail = z.infer<typeof AutopilotProjectDetail>;

export const AutopilotProjectPage = page("projects", AutopilotProject);

// ---- Autopilot admission: the webhook, reconcile and tickets operations -----------------------
// (docs/protocol.md, "Autopilot admission"; ../shared/spec/run-lifecycle.md, "Admission"). A block
// of its own, self-contained, so the projects' schemas can sit beside it.


/** A ticket's provider-qualified identity, such as github:owner/repo#12. */
const TICKET_KEY_SOURCE = "github:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#\\d{1,10}";
export const ticketKeyField = z.string().describe("The ticket's provider-qualified identity, such as github:owner/repo#12.");

/** The webhook's answer: 202 whether the delivery is handed on or ignored (with the reason). */
export const WebhookAccepted = z.object({
  delivery_id: z.string(),
  event: z.string(),
  queued: z.boolean().describe("Handed to admission; false when the delivery is ignored (see ignored_reason)."),
  ignored_reason: z.string().nullable(),
});
export type WebhookAccepted = z.infer<typeof WebhookAccepted>;

const outcome = z
  .enum(["duplicate_delivery", "admitted", "already_admitted", "unchanged", "refused", "capacity_wait", "lapsed", "authorized"])
  .describe(
    "admitted: a run was created; already_admitted: the ticket's run is unfinished; unchanged: this readiness generation already had its run; " +
      "authorized: a new human readiness generation requeued the ticket's blocked run; " +
      "refused / capacity_wait: no run, see reasons; lapsed: the queued run was withdrawn (cancelled) because the issue is no longer eligible; " +
      "duplicate_delivery: this webhook delivery was seen before.",
  );

export const AdmissionOutcome = z.object({
  ticket: ticketKeyField,
  outcome,
  run_id: runId.nullable(),
  reasons: z.array(z.string()),
});

/** An operator's (or the cron's) reconciliation of one project, one bounded step of its pass. */
export const ReconcileResult = z.object({
  project_id: z.string(),
  door: z.enum(["webhook", "reconcile", "startup", "operator"]),
  examined: z.number().int(),
  results: z.array(AdmissionOutcome),
  failures: z.array(z.object({ number: z.number().int(), reason: z.string() })).describe("Issues whose facts could not be read; the next pass tries them again."),
  pass_complete: z.boolean().describe("The pass reached its end; otherwise the next call (or cron tick) continues from the persisted cursor."),
  pass: z.enum(["full", "changed"]).describe("full: every ready issue (an operator's request always makes one); changed: those updated since the last pass began."),
  paused_reason: z.string().nullable().describe("Why the step stopped before its share: the installation's GitHub budget is under AUTOPILOT_GITHUB_RESERVE, or the project's scheduler is disabled or draining; null otherwise."),
});
export type ReconcileResult = z.infer<typeof ReconcileResult>;

export const ListTicketsQuery = z
  .object({
    status: z.enum(["idle", "admitting", "admitted", "refused", "capacity_wait", "lapsed", "done"]).optional(),
    ...pageQuery(keysetCursor(TICKET_KEY_SOURCE)),
  })
  .strict();

export const AutopilotTicket = z.object({
  ticket: ticketKeyField,
  number: z.number().int(),
  issue_url: z.string().describe("the issue's page in its tracker: GitHub's issue page, or Linear's"),
  status: z
    .enum(["idle", "admitting", "admitted", "refused", "capacity_wait", "lapsed", "done"])
    .describe("admitting: its admission is under way (it holds a queue place); admitted: its run is unfinished; refused: not eligible or not authorized (reasons); capacity_wait: eligible but the project's queue is full; lapsed: its queued run was withdrawn; done: its run ended."),
  reasons: z.array(z.string()),
  generation: z.string().nullable().describe("The readiness generation: the tracker's id of the ready label's latest addition."),
  run_id: runId.nullable().describe("The ticket's unfinished run, if any."),
  updated_at_ms: epochMs,
});

/** One entry of a ticket's history: an admission, a refusal, a capacity wait, a lapse, or its run's end. */
export const TicketHistoryEntry = z.object({
  at_ms: epochMs,
  kind: z.enum(["admitted", "refused", "capacity_wait", "lapsed", "run_ended", "authorized"]).describe("authorized: a new human readiness generation requeued the blocked run (the generation is consumed)"),
  door: z.enum(["webhook", "reconcile", "startup", "operator", "withdraw_retry", "run_end"]).describe("The door of the observation; withdraw_retry: the ticket's alarm finished a lapse whose withdrawal had failed; run_end: the ticket's run ended (from its terminal event)."),
  generation: z.string().nullable(),
  run_id: runId.nullable(),
  reasons: z.array(z.string()),
  basis: z
    .enum(["human", "trusted_actor_assumption"])
    .nullable()
    .describe("An admission's authorization: a person's ready transition, or the project's trusted_actor_assumption (no person confirmed)."),
  actor: z.string().nullable().describe("The login whose ready transition an admission relied on."),
});

/** A listed ticket: what its index row keeps, so the list says why without reading each ticket. */
export const ListedAutopilotTicket = AutopilotTicket.extend({
  run_state: RunState.nullable().describe("The state of the ticket's unfinished run (blocked: it waits for a person); null without one."),
  decision: TicketHistoryEntry.pick({ kind: true, door: true, actor: true, basis: true, at_ms: true })
    .nullable()
    .describe("The ticket's latest history entry: what was decided, through which door, and whose ready transition it relied on; null before any."),
  last_error: TrackerLastError.nullable().describe("The last time a door could not read (or admit) this issue, and why; null once a later read succeeded."),
});
export type ListedAutopilotTicket = z.infer<typeof ListedAutopilotTicket>;
export const TicketPage = page("tickets", ListedAutopilotTicket);

export const AdmissionTicketPath = AutopilotProjectPath.extend({ number: z.coerce.number().int().min(1).max(9_999_999_999) });

export const AutopilotTicketDetail = AutopilotTicket.extend({
  admitted_generation: z.string().nullable().describe("The readiness generation that had its run; the same generation never admits another."),
  withdrawal: z
    .object({ run_id: runId, reason: z.string(), attempts: z.number().int().min(0) })
    .nullable()
    .describe("A lapse recorded whose queued run is not withdrawn yet: a claim of that run cancels it instead; the ticket's alarm retries the withdrawal."),
  history: z.array(TicketHistoryEntry).describe("Newest first, at most AUTOPILOT_HISTORY_MAX entries."),
  last_error: TrackerLastError.nullable().describe(
    "The last time a door could not read (or admit) this issue, and why; null once a later read of it succeeded. An issue whose first read failed reads as an idle ticket with this error.",
  ),
});
