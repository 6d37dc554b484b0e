// The dashboard's credits page (README.md, "Dashboard", Credits): cost review of build jobs and of
// autopilot runs' reservations reads in words, and every list is a table on a wide window and a
// card per row on a phone.

import { describe, expect, it } from "vitest";
import { page, signIn } from "./dashboard-helpers";
import { jobInCostReview, reservationInCostReview } from "./builds-helpers";
import { call } from "./helpers";

/** The HTML of the table whose id is `id`, up to its end. */
function table(html: string, id: string): string {
  const start = html.indexOf(`<table id="${id}"`);
  expect(start, id).toBeGreaterThanOrEqual(0);
  return html.slice(start, html.indexOf("</table>", start));
}

describe("the credits page", () => {
  it("a build job in cost review says in words why it waits, in a card per job on a phone with each cell labelled", async () => {
    const { admin, job } = await jobInCostReview("words-review", 3_100);
    const html = (await page("/dash/credits", { cookie: await signIn(admin) })).text;
    for (const id of ["holds", "review", "ledger"]) expect(html).toContain(`<div class="table-wrap"><table id="${id}" class="cards">`);
    const review = table(html, "review");
    expect(review).toContain('<td data-label="Why">its run reported a cost above the reservation</td>');
    expect(review).not.toContain("cost_above_reservation");
    expect(review).toContain(`<td data-label="Run"><a href="/dash/runs/${job.run_id}">`);
    expect(review).toContain('<td data-label="Resolve"><form class="inline" method="post" action="/dash/build-jobs/words-review/resolve">');
    expect(table(html, "ledger")).toContain('<td data-label="Kind">');
  });

  it("an autopilot run's reservation in cost review says it reported no cost, and is resolved from its card", async () => {
    const runId = `run_${"c".repeat(24)}`;
    const { admin, projectId } = await reservationInCostReview("credits-words", runId, { grantCents: 1_000, reservedCents: 100 });
    const session = await signIn(admin);
    const html = (await page("/dash/credits", { cookie: session })).text;
    const review = table(html, "run-review");
    expect(html).toContain('<div class="table-wrap"><table id="run-review" class="cards">');
    expect(review).toContain(`<tr data-run="${runId}">`);
    expect(review).toContain('<td data-label="Cost">unknown</td>');
    expect(review).toContain('<td data-label="Why">its run completed without reporting a cost</td>');
    expect(review).toContain(`aria-label="Resolve the reservation of ${runId}"`);
    expect(table(html, "run-holds")).toContain('<td data-label="Status" class="state">cost_review</td>');

    const action = `/dash/autopilot/projects/${projectId}/reservations/${runId}/resolve`;
    const resolved = await page(action, { cookie: session, form: { cost_cents: "80", note: "provider invoice" } });
    expect(resolved.status).toBe(303);
    const after = (await page(resolved.headers.get("Location")!, { cookie: session })).text;
    expect(after).toContain(`Done: reservation of ${runId} resolved.`);
    expect(after).not.toContain('<table id="run-review"');
    expect(after).toContain('<td data-label="Note" class="note">resolved: provider invoice</td>');
    expect((await call("GET", "/v1/credits", { token: admin })).body).toMatchObject({ held_cents: 0, spent_cents: 80 });
  });
});
