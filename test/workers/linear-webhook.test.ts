// The Linear webhook door's first half (src/autopilot/linear/webhook.ts), in the Workers runtime
// with nodejs_compat: @linear/sdk's LinearWebhookClient verifies Linear-Signature and refuses a
// stale webhookTimestamp here as in Node, and a verified delivery names the issues admission reads.
// Payloads are shaped as Linear sends them (test/fake-linear/webhooks.mjs builds the same).

import { describe, expect, it } from "vitest";
import { linearTicketsOfDelivery, verifiedLinearPayload } from "../../src/autopilot/linear/webhook";
import { sign } from "./autopilot-fakes";

const SECRET = "lin_wh_a_signing_secret";
const READY = { readyLabel: "Ready", readyState: null };
const READY_ID = "2b1f6c1e-0000-4000-8000-00000000aaaa";
const ISSUE_ID = "9f0e2d3c-0000-4000-8000-000000000001";

/** Linear-Signature: the bare hex HMAC-SHA256 (GitHub's sign() with its `sha256=` prefix dropped). */
const linearSignature = async (secret: string, body: string) => (await sign(secret, body)).slice("sha256=".length);

const person = { id: "u1", name: "Alice", email: "alice@example.com", url: "https://linear.app/acme/profiles/alice", type: "user" };

function labelled(actor: Record<string, unknown> = person, { fromLabelIds = [] as string[], ageMs = 0 } = {}) {
  return {
    action: "update",
    type: "Issue",
    actor,
    createdAt: new Date().toISOString(),
    data: { id: ISSUE_ID, identifier: "ENG-1", title: "Dark mode", labelIds: [READY_ID], labels: [{ id: READY_ID, name: "ready", color: "#0e8a16" }], state: { id: "s1", name: "Todo", type: "unstarted" }, stateId: "s1" },
    updatedFrom: { labelIds: fromLabelIds, updatedAt: new Date(Date.now() - 5_000).toISOString() },
    url: "https://linear.app/acme/issue/ENG-1/dark-mode",
    organizationId: "org-1",
    webhookId: "wh-1",
    webhookTimestamp: Date.now() - ageMs,
  };
}

async function verified(payload: unknown, secret = SECRET) {
  const body = JSON.stringify(payload);
  return verifiedLinearPayload(SECRET, body, await linearSignature(secret, body));
}

describe("Linear webhook verification", () => {
  it("a delivery signed with the project's secret and a fresh webhookTimestamp verifies in the Workers runtime", async () => {
    expect(await verified(labelled())).toMatchObject({ type: "Issue", action: "update", data: { identifier: "ENG-1" } });
  });

  it("a wrong secret, a missing or malformed signature and a stale webhookTimestamp are each no delivery", async () => {
    expect(await verified(labelled(), "another-secret")).toBeNull();
    expect(await verified(labelled(person, { ageMs: 61_000 }))).toBeNull();
    const body = JSON.stringify(labelled());
    expect(verifiedLinearPayload(SECRET, body, undefined)).toBeNull();
    expect(verifiedLinearPayload(SECRET, body, "not-hex")).toBeNull();
    const { webhookTimestamp: _, ...untimed } = labelled();
    expect(await verified(untimed)).toBeNull();
  });
});

describe("the issues a Linear delivery names", () => {
  it("the ready label's addition names the issue with its person as sender; a label already there names no sender", async () => {
    const [added] = linearTicketsOfDelivery((await verified(labelled()))!, READY);
    expect(added).toEqual({ issueId: ISSUE_ID, identifier: "ENG-1", sender: { login: "alice@example.com", type: "User", viaApp: null } });
    const [kept] = linearTicketsOfDelivery((await verified(labelled(person, { fromLabelIds: [READY_ID] })))!, READY);
    expect(kept.sender).toBeNull();
  });

  it("an OAuth application's or an integration's change is sent by automation, never a User", async () => {
    const [app] = linearTicketsOfDelivery((await verified(labelled({ id: "oc1", name: "Zapier", type: "OauthClient" })))!, READY);
    expect(app.sender).toEqual({ login: "Zapier", type: "Application", viaApp: "Zapier" });
    const [integration] = linearTicketsOfDelivery((await verified(labelled({ id: "i1", service: "github", type: "integration" })))!, READY);
    expect(integration.sender).toEqual({ login: "github", type: "Integration", viaApp: "github" });
  });

  it("a move into the project's ready state is its ready transition", async () => {
    const moved = { ...labelled(), updatedFrom: { stateId: "s0", updatedAt: new Date().toISOString() }, data: { ...labelled().data, state: { id: "s1", name: "Ready for Agent", type: "unstarted" } } };
    const [ticket] = linearTicketsOfDelivery((await verified(moved))!, { readyLabel: null, readyState: "ready for agent" });
    expect(ticket.sender).toMatchObject({ type: "User" });
  });

  it("a comment names its issue, a blocks relation names the blocked issue, and another relation names none", async () => {
    const base = { createdAt: new Date().toISOString(), organizationId: "org-1", webhookId: "wh-1", webhookTimestamp: Date.now(), actor: person };
    const comment = { ...base, action: "create", type: "Comment", data: { id: "c1", body: "hi", issueId: ISSUE_ID, issue: { id: ISSUE_ID, identifier: "ENG-1" } } };
    expect(linearTicketsOfDelivery((await verified(comment))!, READY).map((t) => t.identifier)).toEqual(["ENG-1"]);
    const blocks = { ...base, action: "remove", type: "IssueRelation", data: { id: "r1", type: "blocks", issueId: "blocker", relatedIssueId: ISSUE_ID, relatedIssue: { id: ISSUE_ID, identifier: "ENG-1" } } };
    expect(linearTicketsOfDelivery((await verified(blocks))!, READY).map((t) => t.issueId)).toEqual([ISSUE_ID]);
    const related = { ...blocks, data: { ...blocks.data, type: "related" } };
    expect(linearTicketsOfDelivery((await verified(related))!, READY)).toEqual([]);
  });
});
