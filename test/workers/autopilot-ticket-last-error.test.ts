// A ticket's last error (docs/protocol.md, "Autopilot admission"): when a door cannot read its
// issue (GitHub unreachable, the App's credentials refused, a blocker unreadable), the ticket says
// why, when and through which door, in the API's ticket read and on the console's ticket page, and
// the next read that succeeds clears it. Nothing else of the ticket changes.
//
// What is real: the project, its store, the admission path, the TicketObject, the routes and the
// console. What stands in: GitHub only, an in-memory tracker whose reads fail as the test says
// (test/workers/autopilot-fakes.ts).

import { describe, expect, it } from "vitest";
import { GitHubError } from "../../src/autopilot/github/errors";
import { call, createOrg } from "./helpers";
import { page, signIn } from "./dashboard-helpers";
import { admitReadyIssue, createProject, deliverReadyIssue, installRealAutopilotWithTracker } from "./autopilot-fakes";

const fake = installRealAutopilotWithTracker();
let admin: string;

/** A project of an organization of its own (one project per repository and organization). */
async function newProject() {
  ({ admin } = await createOrg(`ticket-last-error-${crypto.randomUUID()}`));
  return createProject(admin);
}

/** The labeled webhook of a fresh ready issue `number`, as the queue hands it to admission. */
const labeled = (projectId: string, number: number) => deliverReadyIssue(fake, projectId, number);

const readTicket = (projectId: string, number: number) => call("GET", `/v1/autopilot/projects/${projectId}/tickets/${number}`, { token: admin });

describe("a ticket's last error", () => {
  it("a webhook whose issue GitHub cannot reach leaves the ticket saying why, and the next read that succeeds clears it", async () => {
    const project = await newProject();
    const unreachable = new GitHubError("unavailable", "could not reach GitHub at http://127.0.0.1:9 (connection refused)");
    fake.tracker(project.id).failReads.issue = unreachable;
    await expect(labeled(project.id, 11)).rejects.toThrow("could not reach GitHub");

    const failed = await readTicket(project.id, 11);
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({ status: "idle", run_id: null, last_error: { door: "webhook", failure: "unavailable", message: unreachable.message } });
    expect(failed.body.last_error.at_ms).toBeGreaterThan(Date.now() - 60_000);

    fake.tracker(project.id).failReads.issue = null;
    const admitted = await labeled(project.id, 11);
    expect(admitted?.outcome).toBe("admitted");
    const cleared = await readTicket(project.id, 11);
    expect(cleared.body).toMatchObject({ status: "admitted", run_id: admitted!.runId, last_error: null });
  });

  it("a blocker GitHub refuses to show keeps the admitted run and shows the refusal on the ticket", async () => {
    const project = await newProject();
    const runId = await admitReadyIssue(fake, project.id, 12);
    const refused = new GitHubError("unauthorized", "GitHub refused the App's credentials (401): check the App id, installation id and private key", 401);
    fake.tracker(project.id).failReads.blockers = refused;

    const reconciled = await call("POST", `/v1/autopilot/projects/${project.id}/reconcile`, { token: admin, body: {} });
    expect(reconciled.status).toBe(200);
    expect(reconciled.body.failures).toEqual([expect.objectContaining({ number: 12 })]);
    const ticket = await readTicket(project.id, 12);
    expect(ticket.body).toMatchObject({ status: "admitted", run_id: runId, last_error: { door: "operator", failure: "unauthorized", message: refused.message } });
  });

  it("the console's ticket page shows the last error, reached from the project's ticket list", async () => {
    const project = await newProject();
    await admitReadyIssue(fake, project.id, 13);
    fake.tracker(project.id).failReads.issue = new GitHubError("timeout", "GitHub did not answer within 300 ms");
    await expect(labeled(project.id, 13)).rejects.toThrow();

    const session = await signIn(admin);
    const projectPage = await page(`/dash/autopilot/${project.id}`, { cookie: session });
    expect(projectPage.status).toBe(200);
    expect(projectPage.text).toContain(`href="/dash/autopilot/${project.id}/tickets/13"`);
    const ticketPage = await page(`/dash/autopilot/${project.id}/tickets/13`, { cookie: session });
    expect(ticketPage.status).toBe(200);
    expect(ticketPage.text).toContain("webhook");
    expect(ticketPage.text).toContain("timeout");
    expect(ticketPage.text).toContain("GitHub did not answer within 300 ms");
    expect((await page(`/dash/autopilot/${project.id}/tickets/0`, { cookie: session })).status).toBe(404);
  });
});
