// Linear's webhooks as the stand-in sends them (https://linear.app/developers/webhooks): a JSON body
// {action, type, actor, createdAt, data, updatedFrom, url, organizationId, webhookId,
// webhookTimestamp} POSTed with `Linear-Delivery` (a fresh id per delivery, the same on a retry),
// `Linear-Event` (the type) and `Linear-Signature`, the hex HMAC-SHA256 of the raw body with the
// webhook's signing secret. Tests can lose a delivery, send one stale, or send one again.

import { createHmac, randomUUID } from "node:crypto";

/** Linear-Signature of `body` with `secret`. */
export const signLinear = (secret, body) => createHmac("sha256", secret).update(body).digest("hex");

const iso = (ms) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());

/** The webhook's `actor`: a user, an OAuth application, or an integration, as Linear names them. */
function actorJson(m, by) {
  if (by.user && !by.bot) return { id: by.user.id, name: by.user.name, email: by.user.email, url: `https://linear.app/${m.org.urlKey}/profiles/${by.user.displayName}`, type: "user" };
  if (by.user) return { id: by.bot.id, name: by.bot.name, type: "OauthClient" };
  return { id: by.bot.id, service: by.bot.name, type: "integration" };
}

/** An issue as an Issue webhook's `data` carries it (IssueWebhookPayload, the fields Docket can read). */
export function issueData(m, i) {
  const team = m.teams.get(i.teamId);
  const state = m.states.get(i.stateId);
  return {
    id: i.id, identifier: m.identifier(i), number: i.number, title: i.title, description: i.description, url: m.issueUrl(i),
    createdAt: iso(i.createdAtMs), updatedAt: iso(i.updatedAtMs), completedAt: iso(i.completedAtMs), canceledAt: iso(i.canceledAtMs), archivedAt: null,
    teamId: team.id, team: { id: team.id, key: team.key, name: team.name },
    stateId: state.id, state: { id: state.id, name: state.name, type: state.type, color: state.color },
    labelIds: [...i.labelIds], labels: i.labelIds.map((id) => m.labels.get(id)).map((l) => ({ id: l.id, name: l.name, color: l.color, parentId: null })),
    projectId: i.projectId, creatorId: i.creatorId, priority: 0, priorityLabel: "No priority", prioritySortOrder: 0, sortOrder: 0,
    subscriberIds: [], previousIdentifiers: [], releases: [], reactionData: {},
  };
}

const issueChild = (m, i) => {
  const team = m.teams.get(i.teamId);
  return { id: i.id, identifier: m.identifier(i), title: i.title, url: m.issueUrl(i), teamId: team.id, team: { id: team.id, key: team.key, name: team.name } };
};

/** A change (model.mjs's onChange) as the body of its webhook. */
export function changePayload(m, change, webhookId) {
  const { type, action, by, updatedFrom } = change;
  let data;
  let url;
  if (type === "Issue") ({ data, url } = { data: issueData(m, change.issue), url: m.issueUrl(change.issue) });
  else if (type === "Comment") {
    const c = change.comment;
    data = { id: c.id, body: c.body, issueId: c.issueId, issue: issueChild(m, change.issue), userId: c.userId, botActor: c.botActor ? JSON.stringify(c.botActor) : null, createdAt: iso(c.atMs), updatedAt: iso(c.atMs), reactionData: {} };
    url = c.url;
  } else {
    const r = change.relation;
    const issue = m.issues.get(r.issueId);
    const related = m.issues.get(r.relatedIssueId);
    data = { id: r.id, type: r.type, issueId: r.issueId, relatedIssueId: r.relatedIssueId, issue: issueChild(m, issue), relatedIssue: issueChild(m, related), createdAt: iso(r.createdAtMs), updatedAt: iso(r.createdAtMs) };
    url = m.issueUrl(issue);
  }
  return { action, type, actor: actorJson(m, by), createdAt: new Date().toISOString(), data, ...(updatedFrom ? { updatedFrom } : {}), url, organizationId: m.org.id, webhookId, webhookTimestamp: Date.now() };
}

/** The teams a change is of: its issue's, or both issues' of a relation. */
function teamsOf(m, change) {
  if (change.relation) return [change.relation.issueId, change.relation.relatedIssueId].map((id) => m.issues.get(id).teamId);
  return [change.issue.teamId];
}

/**
 * A workspace's webhooks and their deliveries. `subscribe` adds one (url, secret, resource types);
 * every change of a subscribed type is POSTed to it unless `lose` said to drop it. Each delivery
 * is kept ({id, url, body, signature, status}), so a test can send it again as it was.
 */
export function createWebhooks(m) {
  const hooks = [];
  const deliveries = [];
  let toLose = 0;

  async function post(hook, delivery, body, signature) {
    const res = await fetch(hook.url, {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8", "user-agent": "Linear-Webhook", "linear-delivery": delivery.id, "linear-event": delivery.type, "linear-signature": signature },
      body,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** Sends one change to one hook; `ageMs` backdates its webhookTimestamp (a stale delivery). */
  async function deliver(hook, change, { ageMs = 0 } = {}) {
    const payload = changePayload(m, change, hook.id);
    payload.webhookTimestamp -= ageMs;
    const body = JSON.stringify(payload);
    const delivery = { id: randomUUID(), type: change.type, url: hook.url, body, payload, signature: signLinear(hook.secret, body), answer: null, lost: false };
    deliveries.push(delivery);
    if (toLose > 0) {
      toLose -= 1;
      delivery.lost = true;
      return delivery;
    }
    delivery.answer = await post(hook, delivery, body, delivery.signature);
    return delivery;
  }

  return {
    deliveries,
    /** A webhook of one team (its id; null: every team), as Linear scopes one. */
    subscribe({ url, secret, resourceTypes = ["Issue", "Comment", "IssueRelation"], teamId = null }) {
      const hook = { id: randomUUID(), url, secret, resourceTypes, teamId };
      hooks.push(hook);
      return hook;
    },
    /** The next `times` deliveries are never sent (Linear gave up on them). */
    lose(times = 1) {
      toLose += times;
    },
    /** Every subscribed hook is sent the change; resolves with the deliveries. */
    onChange(change, options) {
      const teams = teamsOf(m, change);
      return Promise.all(hooks.filter((h) => h.resourceTypes.includes(change.type) && (h.teamId === null || teams.includes(h.teamId))).map((h) => deliver(h, change, options)));
    },
    /** Sends a kept delivery again exactly as it was: its body, its signature and its Linear-Delivery id. */
    async redeliver(delivery) {
      const hook = hooks.find((h) => h.url === delivery.url);
      return post(hook, delivery, delivery.body, delivery.signature);
    },
  };
}
