import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// Autopilot projects (../shared/spec/run-lifecycle.md, "Admission"): the tracker repository a
// project watches, its admission policy, and the secrets Docket acts with, encrypted at rest
// (src/autopilot/secrets.ts) so a D1 export never shows them.

export const autopilotProjects = sqliteTable(
  "autopilot_projects",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    name: text("name").notNull(),
    // The tracker whose issues become runs; the code host is always the GitHub repository below.
    provider: text("provider", { enum: ["github", "linear"] }).notNull(),
    repository: text("repository").notNull(), // owner/name, as configured
    // What the project watches, in lower case, one project each: the repository for GitHub Issues
    // (names are case-insensitive), `<workspace>/<team>[/<project>]` for Linear (src/autopilot/tracker-config.ts).
    repositoryKey: text("repository_key").notNull(),
    readyLabel: text("ready_label").notNull(),
    reviewLabel: text("review_label").notNull(),
    briefHeading: text("brief_heading").notNull(),
    doneStates: text("done_states").notNull(), // JSON array of closed state reasons
    doneLabels: text("done_labels").notNull(), // JSON array of labels
    queueCapacity: integer("queue_capacity").notNull(),
    automationAccounts: text("automation_accounts").notNull(), // JSON array of logins
    trustedActorAssumption: integer("trusted_actor_assumption", { mode: "boolean" }).notNull(),
    githubApiUrl: text("github_api_url").notNull(),
    appId: text("app_id").notNull(),
    installationId: text("installation_id").notNull(),
    run: text("run").notNull(), // JSON: {labels, priority, launch: {protocol, command, image, env}}
    // AES-GCM ciphertexts under AUTOPILOT_SECRET_KEY, bound to the project id and the field.
    webhookSecretEnc: text("webhook_secret_enc").notNull(),
    privateKeyEnc: text("private_key_enc").notNull(),
    // The tracker's settings as JSON (src/autopilot/tracker-config.ts): {"kind":"github"}, or a Linear team's.
    tracker: text("tracker").notNull().default('{"kind":"github"}'),
    // The tracker's own API credential (a Linear API key or OAuth token), encrypted like the
    // secrets above; "" for GitHub Issues, which the App's key reads.
    trackerTokenEnc: text("tracker_token_enc").notNull().default(""),
    createdBy: text("created_by").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
    // JSON: the last time a door (webhook, reconcile, operator) could not read the tracker, and why
    // (src/autopilot/last-error.ts); null once a later read succeeded.
    lastError: text("last_error"),
  },
  (t) => [
    index("autopilot_projects_org").on(t.orgId, t.createdAtMs, t.id),
    uniqueIndex("autopilot_projects_repository").on(t.orgId, t.provider, t.repositoryKey),
  ],
);

// Autopilot admission (migrations/0007_autopilot_tickets.sql, restated by 0013): each project's index of its tickets,
// a projection of the TicketObjects, which are the authority (src/autopilot/admission.ts); and
// reconciliation's persisted cursor per project (src/autopilot/reconcile.ts).

export const autopilotTickets = sqliteTable(
  "autopilot_tickets",
  {
    projectId: text("project_id").notNull(),
    ticketKey: text("ticket_key").notNull(), // github:owner/repo#12
    orgId: text("org_id").notNull(),
    number: integer("number").notNull(),
    status: text("status").notNull(),
    reasons: text("reasons").notNull(), // JSON array
    generation: text("generation"),
    runId: text("run_id"),
    updatedAtMs: integer("updated_at_ms").notNull(),
    // What the ticket list shows without reading each TicketObject (migration 0023): its latest
    // history entry (JSON: kind, door, actor, basis, at_ms) and its last error (JSON, null once a
    // later read of the issue succeeded). Null on rows written before they were kept.
    decision: text("decision"),
    lastError: text("last_error"),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.ticketKey] }), index("autopilot_tickets_run").on(t.projectId, t.runId)],
);

export const autopilotReconcile = sqliteTable("autopilot_reconcile", {
  projectId: text("project_id").primaryKey(),
  phase: text("phase").notNull(),
  cursor: text("cursor"),
  updatedAtMs: integer("updated_at_ms").notNull(),
  // The pass under way: "full" reads every ready issue, "changed" those updated since `sinceMs`.
  passKind: text("pass_kind").notNull().default("full"),
  passStartedAtMs: integer("pass_started_at_ms"),
  sinceMs: integer("since_ms"),
  passesSinceFull: integer("passes_since_full").notNull().default(0),
  fullPassFinishedAtMs: integer("full_pass_finished_at_ms"),
  // Why the last tick did not reconcile the project (its installation's reserve), else null.
  pausedReason: text("paused_reason"),
});
