// The stand-in's workspace: one organization, its teams with their workflow states and labels, users
// (people and app users), projects, issues with their history, relations, comments and attachments.
// Every change is made by an actor, recorded in the issue's history as Linear records it (actor,
// botActor, addedLabelIds, fromState/toState) and reported to `onChange` for the webhooks.

import { randomUUID } from "node:crypto";
import { matches } from "./filters.mjs";

/** A team's default workflow, as a new Linear team gets it (name, type). */
const DEFAULT_STATES = [
  ["Backlog", "backlog"],
  ["Todo", "unstarted"],
  ["In Progress", "started"],
  ["In Review", "started"],
  ["Done", "completed"],
  ["Canceled", "canceled"],
];

/**
 * Who makes a change. A person: `{ user }`; an OAuth application acting as itself: `{ user, bot }`
 * (its app user, and the application as the history's botActor); an integration or automation:
 * `{ bot }` alone (no user).
 */
export function createModel({ urlKey = "acme", onChange = () => {} } = {}) {
  const m = {
    org: { id: randomUUID(), name: "Acme", urlKey },
    users: new Map(),
    teams: new Map(),
    states: new Map(),
    labels: new Map(),
    projects: new Map(),
    issues: new Map(),
    relations: [],
    apiKeys: new Map(), // key -> user id
    viewer: null,
    viewerId: () => m.viewer,
    identifier: (i) => `${m.teams.get(i.teamId).key}-${i.number}`,
    issueUrl: (i) => `https://linear.app/${urlKey}/issue/${m.identifier(i)}/${i.title.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "")}`,
    statesOf: (teamId) => [...m.states.values()].filter((s) => s.teamId === teamId).sort((a, b) => a.position - b.position),
    labelsOf: (teamId) => [...m.labels.values()].filter((l) => l.teamId === null || l.teamId === teamId),
  };
  m.stateFilter = { id: (s) => s.id, name: (s) => s.name, type: (s) => s.type, team: { nested: (s, f) => teamMatches(s.teamId, f) } };
  m.labelFilter = { id: (l) => l.id, name: (l) => l.name };
  m.commentFilter = { id: (c) => c.id, body: (c) => c.body };
  m.attachmentFilter = { id: (a) => a.id, url: (a) => a.url, title: (a) => a.title };
  const teamFilterFields = { id: (t) => t.id, key: (t) => t.key, name: (t) => t.name };
  const teamMatches = (teamId, f) => matches(m.teams.get(teamId), f, teamFilterFields);
  m.teamFilter = teamFilterFields;
  m.issueFilter = {
      id: (i) => i.id,
      number: (i) => i.number,
      title: (i) => i.title,
      createdAt: (i) => new Date(i.createdAtMs),
      updatedAt: (i) => new Date(i.updatedAtMs),
      team: { nested: (i, f) => teamMatches(i.teamId, f) },
      project: { nested: (i, f) => (f.null !== undefined && Object.keys(f).length === 1 ? (i.projectId === null) === f.null : i.projectId !== null && matches(m.projects.get(i.projectId), f, { id: (p) => p.id, name: (p) => p.name, slugId: (p) => p.slugId })) },
      state: { nested: (i, f) => matches(m.states.get(i.stateId), f, m.stateFilter) },
    labels: { nested: (i, f) => labelsMatch(i, f) },
  };

  function labelsMatch(issue, f) {
    const labels = issue.labelIds.map((id) => m.labels.get(id));
    return Object.entries(f).every(([key, sub]) => {
      if (key === "some") return labels.some((l) => matches(l, sub, m.labelFilter));
      if (key === "every") return labels.every((l) => matches(l, sub, m.labelFilter));
      if (key === "and") return sub.every((x) => labelsMatch(issue, x));
      if (key === "or") return sub.some((x) => labelsMatch(issue, x));
      if (key === "length") return matches({ n: labels.length }, { n: sub }, { n: (x) => x.n });
      return labels.some((l) => matches(l, { [key]: sub }, m.labelFilter));
    });
  }

  const now = () => Date.now();

  m.addUser = ({ name, app = false, email = `${name.toLowerCase().replace(/\W+/g, ".")}@example.com` }) => {
    const u = { id: randomUUID(), name, displayName: name.toLowerCase().replace(/\W+/g, ""), email, app };
    m.users.set(u.id, u);
    return u;
  };

  m.addTeam = ({ key, name = key }) => {
    const t = { id: randomUUID(), key, name, nextNumber: 1 };
    m.teams.set(t.id, t);
    DEFAULT_STATES.forEach(([stateName, type], position) => {
      const s = { id: randomUUID(), teamId: t.id, name: stateName, type, color: "#bec2c8", position, createdAtMs: now() };
      m.states.set(s.id, s);
    });
    return t;
  };

  m.addLabel = ({ name, teamId = null }) => {
    const l = { id: randomUUID(), name, color: "#0e8a16", teamId, createdAtMs: now() };
    m.labels.set(l.id, l);
    return l;
  };

  m.team = (keyOrId) => [...m.teams.values()].find((t) => t.id === keyOrId || t.key === keyOrId) ?? null;
  m.stateNamed = (teamId, name) => m.statesOf(teamId).find((s) => s.name.toLowerCase() === name.toLowerCase()) ?? null;
  m.labelNamed = (teamId, name) => m.labelsOf(teamId).find((l) => l.name.toLowerCase() === name.toLowerCase()) ?? null;
  /** An issue by its id or its identifier (ENG-12), as Linear's `issue(id:)` accepts either. */
  m.issue = (idOrIdentifier) => m.issues.get(idOrIdentifier) ?? [...m.issues.values()].find((i) => m.identifier(i) === idOrIdentifier) ?? null;

  const record = (issue, by, change) => {
    const h = { id: randomUUID(), issueId: issue.id, atMs: issue.updatedAtMs, actorId: by.user?.id ?? null, botActor: by.bot ?? null, addedLabelIds: null, removedLabelIds: null, fromStateId: null, toStateId: null, ...change };
    issue.history.push(h);
    return h;
  };

  m.createIssue = ({ team, title, description = "", state = "Todo", labels = [], project = null, by }) => {
    const t = m.team(team);
    const at = now();
    const i = {
      id: randomUUID(), number: t.nextNumber++, teamId: t.id, projectId: project, title, description,
      stateId: m.stateNamed(t.id, state).id, labelIds: labels.map((n) => m.labelNamed(t.id, n).id),
      creatorId: by.user?.id ?? null, createdAtMs: at, updatedAtMs: at, completedAtMs: null, canceledAtMs: null, history: [], comments: [], attachments: [],
    };
    m.issues.set(i.id, i);
    record(i, by, { addedLabelIds: i.labelIds.length ? [...i.labelIds] : null, toStateId: i.stateId });
    onChange({ type: "Issue", action: "create", issue: i, by, updatedFrom: null });
    return i;
  };

  /** Changes an issue's labels and state as one update by `by`, recorded and reported as Linear does. */
  m.updateIssue = (i, { addedLabelIds = [], removedLabelIds = [], stateId = null, title = null, description = null }, by) => {
    const before = { labelIds: [...i.labelIds], stateId: i.stateId, updatedAt: new Date(i.updatedAtMs).toISOString(), title: i.title, description: i.description };
    const added = addedLabelIds.filter((id) => !i.labelIds.includes(id));
    const removed = removedLabelIds.filter((id) => i.labelIds.includes(id));
    i.labelIds = [...i.labelIds.filter((id) => !removed.includes(id)), ...added];
    const moved = stateId !== null && stateId !== i.stateId;
    if (moved) i.stateId = stateId;
    if (title !== null) i.title = title;
    if (description !== null) i.description = description;
    i.updatedAtMs = Math.max(now(), i.updatedAtMs + 1);
    const type = m.states.get(i.stateId).type;
    i.completedAtMs = type === "completed" ? i.updatedAtMs : null;
    i.canceledAtMs = type === "canceled" ? i.updatedAtMs : null;
    record(i, by, { addedLabelIds: added.length ? added : null, removedLabelIds: removed.length ? removed : null, fromStateId: moved ? before.stateId : null, toStateId: moved ? i.stateId : null });
    const updatedFrom = { updatedAt: before.updatedAt };
    if (added.length || removed.length) updatedFrom.labelIds = before.labelIds;
    if (moved) updatedFrom.stateId = before.stateId;
    if (title !== null) updatedFrom.title = before.title;
    if (description !== null) updatedFrom.description = before.description;
    onChange({ type: "Issue", action: "update", issue: i, by, updatedFrom });
    return i;
  };

  /** `blocker` blocks `blocked`: Linear's relation of type "blocks" (blocked's inverse relation). */
  m.relate = (blocker, blocked, by, type = "blocks") => {
    const r = { id: randomUUID(), type, issueId: blocker.id, relatedIssueId: blocked.id, createdAtMs: now() };
    m.relations.push(r);
    onChange({ type: "IssueRelation", action: "create", relation: r, by, updatedFrom: null });
    return r;
  };

  m.comment = (i, body, by) => {
    const c = { id: randomUUID(), issueId: i.id, body, userId: by.user?.id ?? null, botActor: by.bot ?? null, atMs: now() };
    c.url = `${m.issueUrl(i)}#comment-${c.id.slice(0, 8)}`;
    i.comments.push(c);
    onChange({ type: "Comment", action: "create", comment: c, issue: i, by, updatedFrom: null });
    return c;
  };

  m.attach = (i, { title, subtitle = null, url, metadata = {} }, by) => {
    const existing = i.attachments.find((a) => a.url === url);
    if (existing) return Object.assign(existing, { title, subtitle, metadata, atMs: now() });
    const a = { id: randomUUID(), issueId: i.id, title, subtitle, url, metadata, creatorId: by.user?.id ?? null, atMs: now() };
    i.attachments.push(a);
    return a;
  };

  return m;
}
