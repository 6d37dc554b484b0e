// The stand-in's root resolvers: Linear's queries and the mutations Docket makes, each acting as
// the API key's user (the viewer). A mutation records its change as made by that user, so Linear's
// webhook for it (and the issue's history) names the key's owner, as Linear's do.

import { GraphQLError } from "graphql";

const notFound = (what) => new GraphQLError(`Entity not found: ${what}`, { extensions: { type: "invalid input", code: "INPUT_ERROR" } });

export function makeRoot(model, views) {
  const viewerActor = () => {
    const user = model.users.get(model.viewer);
    return user.app ? { user, bot: { id: user.id, type: "oauthClient", name: user.name } } : { user };
  };
  const mustIssue = (id) => model.issue(id) ?? (() => { throw notFound(`Issue ${id}`); })();
  const sync = () => Date.now();
  const issuePayload = (issue) => ({ success: true, lastSyncId: sync(), issue: views.issue(issue) });

  return {
    viewer: () => views.user(model.users.get(model.viewer)),
    organization: () => views.organization(),
    issue: ({ id }) => views.issue(mustIssue(id)),
    issues: (args) => views.connection([...model.issues.values()].sort(args.orderBy === "updatedAt" ? byUpdated : byCreated), args, views.issue, model.issueFilter),
    team: ({ id }) => views.team(model.team(id) ?? (() => { throw notFound(`Team ${id}`); })()),
    teams: (args) => views.connection([...model.teams.values()], args, views.team, model.teamFilter),
    workflowStates: (args) => views.connection([...model.states.values()], args, views.state, model.stateFilter),
    issueLabels: (args) => views.connection([...model.labels.values()], args, views.label, model.labelFilter),
    user: ({ id }) => views.user(model.users.get(id) ?? (() => { throw notFound(`User ${id}`); })()),
    comment: ({ id }) => {
      const found = [...model.issues.values()].flatMap((i) => i.comments).find((c) => c.id === id);
      if (!found) throw notFound(`Comment ${id}`);
      return views.comment(found);
    },

    issueUpdate: ({ id, input }) => {
      const issue = mustIssue(id);
      const added = [...(input.addedLabelIds ?? []), ...(input.labelIds ?? []).filter((l) => !issue.labelIds.includes(l))];
      const removed = [...(input.removedLabelIds ?? []), ...(input.labelIds ? issue.labelIds.filter((l) => !input.labelIds.includes(l)) : [])];
      for (const labelId of added) if (!model.labels.has(labelId)) throw notFound(`IssueLabel ${labelId}`);
      if (input.stateId && !model.states.has(input.stateId)) throw notFound(`WorkflowState ${input.stateId}`);
      model.updateIssue(issue, { addedLabelIds: added, removedLabelIds: removed, stateId: input.stateId ?? null, title: input.title ?? null, description: input.description ?? null }, viewerActor());
      return issuePayload(issue);
    },
    issueAddLabel: ({ id, labelId }) => issuePayload(model.updateIssue(mustIssue(id), { addedLabelIds: [labelId] }, viewerActor())),
    issueRemoveLabel: ({ id, labelId }) => issuePayload(model.updateIssue(mustIssue(id), { removedLabelIds: [labelId] }, viewerActor())),
    commentCreate: ({ input }) => {
      if (!input.issueId) throw new GraphQLError("Argument Validation Error: issueId required", { extensions: { type: "invalid input", code: "INPUT_ERROR" } });
      const comment = model.comment(mustIssue(input.issueId), input.body ?? "", viewerActor());
      return { success: true, lastSyncId: sync(), comment: views.comment(comment) };
    },
    attachmentCreate: ({ input }) => attach(mustIssue(input.issueId), input),
    attachmentLinkURL: (args) => attach(mustIssue(args.issueId), { title: args.title ?? args.url, url: args.url }),
  };

  function attach(issue, { title, subtitle = null, url, metadata = {} }) {
    const attachment = model.attach(issue, { title, subtitle, url, metadata: metadata ?? {} }, viewerActor());
    return { success: true, lastSyncId: sync(), attachment: views.attachment(attachment) };
  }
}

/** Newest first, as Linear lists by createdAt (ties by id, so a cursor names a stable position). */
const byCreated = (a, b) => b.createdAtMs - a.createdAtMs || (a.id < b.id ? -1 : 1);
/** Most recently updated first, as Linear lists by updatedAt. */
const byUpdated = (a, b) => b.updatedAtMs - a.updatedAtMs || (a.id < b.id ? -1 : 1);
