// The tracker behind autopilot admission (../shared/spec/run-lifecycle.md, "Admission"): what the
// core asks of a tracker, provider-neutral, so a second tracker implements this interface without
// touching admission. GitHub Issues is the first (src/autopilot/github/), Linear the second
// (src/autopilot/linear/). The code host a run's branch and pull request go to is apart from the
// tracker: PublicationProvider, always GitHub.

export type TrackerKind = "github" | "linear";

/**
 * A ticket's provider-qualified identity. `repository` is where its number counts: GitHub's
 * owner/name; Linear's `<workspace url key>/<team key>` (an issue's identifier is its team's key
 * and its number, ENG-12). Keys: `github:owner/repo#12`, `linear:acme/ENG-12`.
 */
export interface TicketRef {
  provider: TrackerKind;
  repository: string;
  number: number;
}

export function ticketKey(ref: TicketRef): string {
  if (ref.provider === "linear") return `linear:${ref.repository}-${ref.number}`;
  return `${ref.provider}:${ref.repository}#${ref.number}`;
}

/** A ticket as people name it: owner/repo#12 on GitHub, ENG-12 on Linear. */
export function ticketName(ref: TicketRef): string {
  if (ref.provider === "linear") return `${ref.repository.slice(ref.repository.indexOf("/") + 1)}-${ref.number}`;
  return `${ref.repository}#${ref.number}`;
}

/**
 * The name of a ticket's Durable Object: the project, then the issue's key lower-cased
 * (`apj_…:github:owner/repo#12`; ../shared/DESIGN.md, "Each ticket is a Durable Object too").
 * Projects are unique per organization, not per repository, so two organizations watching one
 * repository never share a ticket; GitHub names compare without case, so "Owner/Repo" and
 * "owner/repo" are one ticket (only the repository part of a key has letters that can differ).
 */
export function ticketObjectName(projectId: string, key: string): string {
  return `${projectId}:${key.toLowerCase()}`;
}

/** An issue as the tracker reports it now. */
export interface IssueFacts {
  ref: TicketRef;
  title: string;
  body: string;
  /** Closed: done or given up (Linear: a state of type completed or canceled, or a configured done state). */
  state: "open" | "closed";
  /** Why a closed issue was closed (completed, not_planned, duplicate, reopened), else null. */
  stateReason: string | null;
  /** The issue's workflow state by name, where the tracker has workflow states (Linear); else absent. */
  status?: string | null;
  labels: string[];
  url: string;
  updatedAtMs: number;
}

/** A blocking dependency the tracker reports; `facts` null when the installation cannot read it. */
export interface Blocker {
  ref: TicketRef;
  facts: IssueFacts | null;
  /** Why it could not be read (facts null), for the refusal shown to people. */
  unreadable: string | null;
}

/** Who performed a ready transition, from the tracker's own record of the issue's events. */
export interface ActorEvidence {
  login: string;
  /**
   * The kind of account: "User" is the only kind that may be a person; anything else ("Bot",
   * "Organization", Linear's "App" for an application's own user) is not.
   */
  type: string;
  /** The app or integration the change was made through, when the tracker says so; else null. */
  viaApp: string | null;
}

/** The latest ready transition (the ready label added, or the move to the ready state), and by whom. */
export interface ReadyTransition {
  /** The tracker's id of the event, so a generation names the transition that opened it. */
  eventId: string;
  atMs: number;
  actor: ActorEvidence | null;
}

/** What the tracker's record of an issue's events says of its readiness. */
export interface ReadyEvidence {
  /** The most recent addition of the ready label, or null when the record holds none. */
  transition: ReadyTransition | null;
  /** When the record last shows a change of the issue's labels or state (epoch ms); null: it shows none. */
  lastChangeAtMs: number | null;
}

/** A ready issue as the list reports it: which one, and when it last changed. */
export interface ReadyIssue {
  ref: TicketRef;
  updatedAtMs: number;
}

export interface ReadyIssuePage {
  issues: ReadyIssue[];
  /**
   * Where the walk goes on; null past the last issue. It names a stable position (the last issue
   * handed out), never an offset that depends on how many were asked for.
   */
  cursor: string | null;
}

/** An installation's request budget as the tracker last stated it. */
export interface Headroom {
  remaining: number;
  limit: number;
  /** When the budget is whole again (epoch ms); 0 when the tracker did not say. */
  resetAtMs: number;
  /** Whose budget it is, for people; absent: the GitHub installation's. */
  of?: string;
}

/**
 * A tracker, for one project. `label` in what follows is the project's ready marker
 * (readyMarker in src/autopilot/deps.ts): its ready label, or the ready workflow state's name where
 * the project is ready by state; the provider knows which from its project.
 */
export interface TrackerProvider {
  getIssue(ref: TicketRef): Promise<IssueFacts | null>;
  listBlockers(ref: TicketRef): Promise<Blocker[]>;
  /** The most recent ready transition of the issue, or null when the tracker records none. */
  lastReadyTransition(ref: TicketRef, label: string): Promise<ReadyTransition | null>;
  /**
   * The same, with when the issue's labels or state last changed, from the same reads: what lets
   * admission trust an issue as a signed webhook delivery stated it. Absent: the tracker cannot say.
   */
  readyEvidence?(ref: TicketRef, label: string): Promise<ReadyEvidence>;
  /**
   * Open issues carrying `label`, in a stable order, at most `limit` from `cursor`; with `sinceMs`,
   * only those changed since then (epoch ms; null: all).
   */
  listReadyIssues(label: string, cursor: string | null, limit: number, sinceMs?: number | null): Promise<ReadyIssuePage>;
  /** The request budget the tracker last stated for this project's installation, if it states one. */
  headroom?(): Promise<Headroom | null>;
  /** Posts a comment on the ticket once (no retry of its own: a delivery looks for it before posting again). */
  postComment(ref: TicketRef, body: string): Promise<CommentReceipt>;
  /** The ticket's comment whose text contains `marker`, or null (a bounded number of pages is read). */
  findComment(ref: TicketRef, marker: string): Promise<CommentReceipt | null>;
  /**
   * Links the run's pull request to the ticket, once however often it is called (Linear: an
   * attachment, made or found by its URL). A tracker without it is told of the pull request in a
   * comment (the pr_comment delivery).
   */
  linkPullRequest?(ref: TicketRef, pr: { url: string; title: string }): Promise<CommentReceipt>;
  /**
   * The status mapping for a published run: removes the ready marker and adds the review marker
   * (GitHub: labels; Linear: the ready label off, the issue moved to the review state). Removing a
   * marker the ticket does not carry is no failure.
   */
  moveLabels(ref: TicketRef, labels: { remove: string[]; add: string[] }): Promise<void>;
}

/** A comment as the tracker stored it. */
export interface CommentReceipt {
  id: string;
  url: string;
}

/** `github:owner/repo#12` or `linear:acme/ENG-12` back into its parts; null for anything else. */
export function parseTicketKey(key: string): TicketRef | null {
  const github = /^github:([^/#\s]+\/[^/#\s]+)#(\d+)$/.exec(key);
  if (github) return { provider: "github", repository: github[1], number: Number(github[2]) };
  const linear = /^linear:([^/\s]+\/[A-Za-z0-9_]+)-(\d+)$/.exec(key);
  return linear ? { provider: "linear", repository: linear[1], number: Number(linear[2]) } : null;
}

/** A short-lived credential to push one repository (never stored, never given to a sandbox). */
export interface PushToken {
  token: string;
  expiresAtMs: number;
}

/** A pull request as the tracker reports it. */
export interface PullRequestFacts {
  number: number;
  url: string;
  /** The head branch's name (without owner). */
  branch: string;
  state: "open" | "closed";
}

export type CreatedPullRequest = { created: PullRequestFacts } | { exists: true };

/**
 * What publication asks of the tracker's code host (../shared/spec/run-lifecycle.md, "Completion
 * and recovery"): a push credential for one repository, a branch's head, and the pull request of a
 * branch, found before one is ever created.
 */
export interface PublicationProvider {
  /** A token that may write the contents of `repository` (owner/name) only. */
  issuePushToken(repository: string): Promise<PushToken>;
  /** The commit `branch` points at now, or null when it does not exist. */
  branchHead(repository: string, branch: string): Promise<string | null>;
  /** The pull request (open or closed) whose head is `branch` of `repository` itself, or null. */
  findPullRequest(repository: string, branch: string): Promise<PullRequestFacts | null>;
  /** Opens a pull request; `{ exists: true }` when one for the branch already exists. `base` null: the default branch. */
  createPullRequest(repository: string, pr: { branch: string; base: string | null; title: string; body: string }): Promise<CreatedPullRequest>;
}
