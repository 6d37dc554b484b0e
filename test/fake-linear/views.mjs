// The stand-in's model as Linear's GraphQL types show it: each view is a plain object whose fields
// are values or resolver functions (graphql-js calls a function field with its arguments), built
// from the model (model.mjs) on demand, so a query reads only what it asks for.

import { matches, page } from "./filters.mjs";

const iso = (ms) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());

/** The views over model `m` (model.mjs's store). */
export function makeViews(m) {
  const connection = (models, args, view, filterFields = null) => {
    const kept = filterFields ? models.filter((x) => matches(x, args?.filter, filterFields)) : models;
    const p = page(kept, args ?? {});
    return { nodes: p.nodes.map(view), pageInfo: p.pageInfo };
  };

  const organization = () => ({ ...m.org });

  const user = (u) =>
    u && { id: u.id, name: u.name, displayName: u.displayName, email: u.email, app: u.app, active: true, guest: false, isMe: u.id === m.viewerId(), url: `https://linear.app/${m.org.urlKey}/profiles/${u.displayName}` };

  const bot = (b) => b && { id: b.id, type: b.type, subType: b.subType ?? null, name: b.name, userDisplayName: null, avatarUrl: null };

  const team = (t) =>
    t && {
      id: t.id,
      key: t.key,
      name: t.name,
      organization,
      states: (args) => connection(m.statesOf(t.id), args, state, m.stateFilter),
      labels: (args) => connection(m.labelsOf(t.id), args, label, m.labelFilter),
    };

  const state = (s) =>
    s && { id: s.id, name: s.name, type: s.type, color: s.color, position: s.position, team: () => team(m.teams.get(s.teamId)), createdAt: iso(s.createdAtMs), updatedAt: iso(s.createdAtMs) };

  const label = (l) => l && { id: l.id, name: l.name, color: l.color, isGroup: false, team: () => (l.teamId ? team(m.teams.get(l.teamId)) : null), createdAt: iso(l.createdAtMs), updatedAt: iso(l.createdAtMs) };

  const project = (p) => p && { id: p.id, name: p.name, slugId: p.slugId, url: `https://linear.app/${m.org.urlKey}/project/${p.slugId}` };

  const issue = (i) =>
    i && {
      id: i.id,
      identifier: m.identifier(i),
      number: i.number,
      title: i.title,
      description: i.description,
      url: m.issueUrl(i),
      branchName: `${m.identifier(i).toLowerCase()}`,
      createdAt: iso(i.createdAtMs),
      updatedAt: iso(i.updatedAtMs),
      completedAt: iso(i.completedAtMs),
      canceledAt: iso(i.canceledAtMs),
      archivedAt: null,
      state: () => state(m.states.get(i.stateId)),
      team: () => team(m.teams.get(i.teamId)),
      project: () => project(m.projects.get(i.projectId) ?? null),
      creator: () => user(m.users.get(i.creatorId) ?? null),
      botActor: null,
      labels: (args) => connection(i.labelIds.map((id) => m.labels.get(id)), args, label, m.labelFilter),
      relations: (args) => connection(m.relations.filter((r) => r.issueId === i.id), args, relation),
      inverseRelations: (args) => connection(m.relations.filter((r) => r.relatedIssueId === i.id), args, relation),
      // Newest first, as Linear lists an issue's history.
      history: (args) => connection([...i.history].reverse(), args, history),
      comments: (args) => connection(i.comments, args, comment, m.commentFilter),
      attachments: (args) => connection(i.attachments, args, attachment, m.attachmentFilter),
    };

  const relation = (r) => ({ id: r.id, type: r.type, issue: () => issue(m.issues.get(r.issueId)), relatedIssue: () => issue(m.issues.get(r.relatedIssueId)), createdAt: iso(r.createdAtMs), updatedAt: iso(r.createdAtMs), archivedAt: null });

  const history = (h) => ({
    id: h.id,
    createdAt: iso(h.atMs),
    updatedAt: iso(h.atMs),
    issue: () => issue(m.issues.get(h.issueId)),
    actor: () => user(m.users.get(h.actorId) ?? null),
    actorId: h.actorId,
    botActor: bot(h.botActor),
    addedLabelIds: h.addedLabelIds,
    removedLabelIds: h.removedLabelIds,
    addedLabels: () => h.addedLabelIds?.map((id) => label(m.labels.get(id))) ?? null,
    removedLabels: () => h.removedLabelIds?.map((id) => label(m.labels.get(id))) ?? null,
    fromState: () => state(m.states.get(h.fromStateId) ?? null),
    fromStateId: h.fromStateId,
    toState: () => state(m.states.get(h.toStateId) ?? null),
    toStateId: h.toStateId,
  });

  const comment = (c) => ({ id: c.id, body: c.body, url: c.url, createdAt: iso(c.atMs), updatedAt: iso(c.atMs), user: () => user(m.users.get(c.userId) ?? null), botActor: bot(c.botActor), issue: () => issue(m.issues.get(c.issueId)), issueId: c.issueId });

  const attachment = (a) => ({ id: a.id, title: a.title, subtitle: a.subtitle, url: a.url, metadata: a.metadata, createdAt: iso(a.atMs), updatedAt: iso(a.atMs), creator: () => user(m.users.get(a.creatorId) ?? null), issue: () => issue(m.issues.get(a.issueId)) });

  return { connection, organization, user, team, state, label, issue, comment, attachment };
}
