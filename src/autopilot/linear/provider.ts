// Linear as the tracker behind autopilot admission (../shared/spec/run-lifecycle.md, "Admission":
// "provider-resolved blocking dependencies", "configured status mapping"): a Linear team's issues
// (optionally one Linear project's) read through Linear's GraphQL API with the project's API key;
// their runs' branches and pull requests go to the GitHub repository (PublicationProvider). An
// issue's ticket is its identifier (ENG-12): `linear:<workspace>/ENG-12`.

import type { Config } from "../../config";
import type { Blocker, CommentReceipt, IssueFacts, ReadyEvidence, ReadyIssuePage, TicketRef, TrackerProvider } from "../provider";
import { linearScope, type LinearTracker } from "../tracker-config";
import { readyEvidenceOf } from "./actors";
import { linearClient, type LinearClient } from "./client";
import { LinearError } from "./errors";
import { BLOCKERS, FIND_COMMENT, GET_ISSUE, HISTORY, LINK_URL, POST_COMMENT, READY_ISSUES, STATUS_TARGETS, UPDATE_ISSUE, type Connection, type HistoryNode, type IssueNode } from "./queries";

/** What the provider needs of an autopilot project (AutopilotProject has these fields). */
export interface LinearProjectSettings {
  id: string;
  tracker: LinearTracker;
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
const identifier = (ref: TicketRef) => `${ref.repository.slice(ref.repository.indexOf("/") + 1)}-${ref.number}`;

/**
 * An issue as admission reads it. Closed is done (a state of type completed, or one of the
 * project's done states: stateReason "completed") or canceled ("not_planned"); `status` is the
 * workflow state's name, what a project ready by state is judged by.
 */
export function issueFacts(node: IssueNode, tracker: LinearTracker): IssueFacts {
  const done = node.state.type === "completed" || tracker.doneStates.some((s) => same(s, node.state.name));
  const closed = done || node.state.type === "canceled";
  return {
    ref: { provider: "linear", repository: linearScope({ workspace: tracker.workspace, team: node.team.key }), number: node.number },
    title: node.title,
    body: node.description ?? "",
    state: closed ? "closed" : "open",
    stateReason: done ? "completed" : closed ? "not_planned" : null,
    status: node.state.name,
    labels: node.labels.nodes.map((l) => l.name),
    url: node.url,
    updatedAtMs: Date.parse(node.updatedAt),
  };
}

/** Every node of a connection, page by page, at most LINEAR_PAGES_MAX pages (more is too_many_pages). */
async function walk<T>(config: Config, what: string, page: (after: string | null) => Promise<Connection<T> | null>): Promise<T[]> {
  const nodes: T[] = [];
  let after: string | null = null;
  for (let n = 0; n < config.linearPagesMax; n += 1) {
    const conn: Connection<T> | null = await page(after);
    if (!conn) return nodes;
    nodes.push(...conn.nodes);
    if (!conn.pageInfo.hasNextPage || !conn.pageInfo.endCursor) return nodes;
    after = conn.pageInfo.endCursor;
  }
  throw new LinearError("too_many_pages", `${what} has more than LINEAR_PAGES_MAX (${config.linearPagesMax}) pages of ${config.linearPageSize}`);
}

export function linearProvider(project: LinearProjectSettings, secrets: { trackerToken?: string }, config: Config, client?: LinearClient): TrackerProvider {
  const tracker = project.tracker;
  const linear = client ?? linearClient({ apiUrl: tracker.apiUrl, token: secrets.trackerToken ?? "" }, config);
  const first = config.linearPageSize;
  const marker = (ready: string) => (tracker.readyLabel === null ? { label: null, state: ready } : { label: ready, state: null });

  /** The issue's history, every page: the evidence of who made it ready. */
  const history = (ref: TicketRef) =>
    walk<HistoryNode>(config, `the history of ${identifier(ref)}`, async (after) => {
      const data = await linear.request<{ issue: { history: Connection<HistoryNode> } }>(HISTORY, { id: identifier(ref), first, after });
      return data.issue.history;
    });
  const readyEvidence = async (ref: TicketRef, ready: string): Promise<ReadyEvidence> => readyEvidenceOf(await history(ref), marker(ready));

  return {
    async getIssue(ref) {
      try {
        const data = await linear.request<{ issue: IssueNode }>(GET_ISSUE, { id: identifier(ref), labels: first });
        // An issue of another Linear project is not this project's to read, as a deleted one.
        if (tracker.project && data.issue.project?.id !== tracker.project) return null;
        return issueFacts(data.issue, tracker);
      } catch (err) {
        if (err instanceof LinearError && err.notFound) return null;
        throw err;
      }
    },
    async listBlockers(ref) {
      const relations = await walk<{ type: string; issue: IssueNode | null }>(config, `the relations of ${identifier(ref)}`, async (after) => {
        const data = await linear.request<{ issue: { inverseRelations: Connection<{ type: string; issue: IssueNode | null }> } }>(BLOCKERS, { id: identifier(ref), first, after, labels: first });
        return data.issue.inverseRelations;
      });
      return relations.filter((r) => r.type === "blocks").map((r) => blockerOf(r.issue, ref, tracker));
    },
    async lastReadyTransition(ref, ready) {
      return (await readyEvidence(ref, ready)).transition;
    },
    readyEvidence,
    async listReadyIssues(ready, cursor, limit, sinceMs) {
      const data = await linear.request<{ issues: Connection<{ number: number; updatedAt: string }> }>(READY_ISSUES, {
        filter: readyFilter(tracker, marker(ready), sinceMs ?? null),
        first: Math.max(1, Math.min(limit, first)),
        after: cursor,
      });
      const scope = linearScope(tracker);
      return {
        issues: data.issues.nodes.map((n) => ({ ref: { provider: "linear", repository: scope, number: n.number }, updatedAtMs: Date.parse(n.updatedAt) })),
        cursor: data.issues.pageInfo.hasNextPage ? data.issues.pageInfo.endCursor : null,
      } satisfies ReadyIssuePage;
    },
    headroom: async () => linear.headroom(),
    async postComment(ref, body) {
      const data = await linear.request<{ commentCreate: { comment: CommentReceipt } }>(POST_COMMENT, { input: { issueId: identifier(ref), body } });
      return { id: data.commentCreate.comment.id, url: data.commentCreate.comment.url };
    },
    async findComment(ref, text) {
      // Linear filters the comments by their text itself: one page of one is the answer.
      const data = await linear.request<{ issue: { comments: Connection<CommentReceipt> } }>(FIND_COMMENT, { id: identifier(ref), marker: text, first: 1, after: null });
      const found = data.issue.comments.nodes[0];
      return found ? { id: found.id, url: found.url } : null;
    },
    async linkPullRequest(ref, pr) {
      const data = await linear.request<{ attachmentLinkURL: { attachment: CommentReceipt } }>(LINK_URL, { issueId: identifier(ref), url: pr.url, title: pr.title });
      return { id: data.attachmentLinkURL.attachment.id, url: data.attachmentLinkURL.attachment.url };
    },
    moveLabels: (ref, labels) => moveStatus(linear, first, ref, labels),
  };
}

/** A blocker as eligibility judges it; Linear naming no issue for the relation is an unreadable blocker. */
function blockerOf(issue: IssueNode | null, blocked: TicketRef, tracker: LinearTracker): Blocker {
  if (!issue) return { ref: { ...blocked, number: 0 }, facts: null, unreadable: "Linear names no issue for this blocking relation (not visible to the API key)" };
  const facts = issueFacts(issue, tracker);
  return { ref: facts.ref, facts, unreadable: null };
}

/** Ready issues of the team (and project): open ones carrying the label, or those in the ready state. */
function readyFilter(tracker: LinearTracker, marker: { label: string | null; state: string | null }, sinceMs: number | null): Record<string, unknown> {
  return {
    team: { key: { eq: tracker.team } },
    ...(tracker.project ? { project: { id: { eq: tracker.project } } } : {}),
    ...(marker.state
      ? { state: { name: { eqIgnoreCase: marker.state } } }
      : { labels: { some: { name: { eqIgnoreCase: marker.label } } }, state: { type: { nin: ["completed", "canceled"] } } }),
    ...(sinceMs !== null ? { updatedAt: { gt: new Date(sinceMs).toISOString() } } : {}),
  };
}

/**
 * The status mapping (TrackerProvider.moveLabels): the issue moves to the review state named in
 * `add` and loses the labels in `remove` it carries (the ready label; a ready state is left by the
 * move itself), in one update. A team without the review state is a failure naming it.
 */
async function moveStatus(linear: LinearClient, first: number, ref: TicketRef, labels: { remove: string[]; add: string[] }): Promise<void> {
  type Targets = { issue: { id: string; labels: { nodes: { id: string; name: string }[] }; team: { states: { nodes: { id: string; name: string }[] } } } };
  const { issue } = await linear.request<Targets>(STATUS_TARGETS, { id: identifier(ref), labels: first, states: labels.add });
  const state = issue.team.states.nodes.find((s) => labels.add.some((name) => same(name, s.name)));
  if (labels.add.length > 0 && !state) throw new Error(`the Linear team of ${identifier(ref)} has no workflow state "${labels.add[0]}" (the project's review_state)`);
  const removedLabelIds = issue.labels.nodes.filter((l) => labels.remove.some((name) => same(name, l.name))).map((l) => l.id);
  const input = { ...(state ? { stateId: state.id } : {}), ...(removedLabelIds.length > 0 ? { removedLabelIds } : {}) };
  if (Object.keys(input).length === 0) return;
  await linear.request(UPDATE_ISSUE, { id: issue.id, input });
}
