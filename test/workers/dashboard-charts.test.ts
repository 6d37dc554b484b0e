// The queue page's charts as a reader without eyesight or a mouse meets them: labelled axes, each
// hour's value as a tooltip, and the values as a table (README.md, "Dashboard").

import { describe, expect, it } from "vitest";
import { page, signIn } from "./dashboard-helpers";
import { createOrg, dispatch } from "./helpers";

const HOUR_MS = 3_600_000;
const hourText = (ms: number) => `${new Date(Math.floor(ms / HOUR_MS) * HOUR_MS).toISOString().slice(11, 16)}Z`;

describe("the dashboard's charts", () => {
  it("name their axes (the hour in UTC and what they count) and give each hour's value as text: a tooltip per hour and a table of the hours", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    await dispatch(admin, { labels: ["gpu"] });
    await dispatch(admin, { labels: ["gpu"] });
    const before = Date.now();
    const html = (await page("/dash", { cookie: session })).text;
    // Either hour, should the request have crossed one.
    const hours = new Set([hourText(before), hourText(Date.now())]);
    const depth = html.slice(html.indexOf('id="chart-depth"'), html.indexOf('id="chart-started"'));

    expect(depth).toContain('class="y-label">runs queued</text>');
    expect(depth).toContain('class="x-label">hour (UTC), last 24 hours</text>');
    expect(depth).toContain('class="y-peak">2</text>');
    const tooltips = [...depth.matchAll(/<title>(\d\d:\d\dZ): (\d+) runs queued<\/title>/g)];
    expect(tooltips).toHaveLength(24);
    expect(hours).toContain(tooltips[23][1]);
    expect(tooltips[23][2]).toBe("2");

    expect(depth).toContain("<summary>Queue depth (highest in the hour): each hour&#39;s value</summary>");
    const rows = [...depth.matchAll(/<tr><th scope="row">(\d\d:\d\dZ)<\/th><td>(\d+)<\/td><\/tr>/g)].map((m) => [m[1], m[2]]);
    expect(rows).toHaveLength(24);
    // The table says what the tooltips say, hour by hour.
    expect(rows).toEqual(tooltips.map((t) => [t[1], t[2]]));
  });
});
