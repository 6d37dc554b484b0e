// The dashboard's scripts, served as files of their own under /dash/assets/ so the pages' Content
// Security Policy allows scripts from this origin only, never inline ones (src/dashboard/routes.tsx).

import { DASH } from "./session";

/**
 * What both scripts refresh a page with: each element with data-live and an id is swapped for its
 * namesake in a fresh copy of the page, except a region the reader is using (focus inside, a ticked
 * confirmation box), left for the next refresh so a form is never reset under them.
 */
const SWAP_LIVE_REGIONS_JS = `function busyHere(el) { return el.contains(document.activeElement) || el.querySelector("input:checked") !== null; }
  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    document.querySelectorAll("[data-live][id]").forEach(function (el) {
      var next = fresh.getElementById(el.id);
      if (next && !busyHere(el)) el.replaceWith(document.importNode(next, true));
    });
  }`;

/**
 * Live events on a run's page: each event of the run's stream (through the dashboard) refreshes the
 * page's live parts (`data-live`, by id, as the live lists do) from the page's own HTML, which says
 * in words what happened and keeps the timelines built from the run's record; one fetch at a time,
 * a failure said in #live-status. The page reloads when the run ends.
 */
const LIVE_EVENTS_JS = `(function () {
  var list = document.getElementById("events");
  if (!window.EventSource || !list || !list.dataset.stream) return;
  var source = new EventSource(list.dataset.stream + "?after=" + list.dataset.after), busy = false, again = false;
  function say(text) { var s = document.getElementById("live-status"); if (s) s.textContent = text; }
  ${SWAP_LIVE_REGIONS_JS}
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      swap(html);
      say("");
    }).catch(function (err) { say("Live updates failed (" + err.message + "): reload the page."); }).then(function () {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  }
  source.onmessage = refresh;
  source.addEventListener("end", function () { source.close(); location.reload(); });
  // A form sent from this page (cancel, pause) navigates away: a reload on the run's end must not overtake it.
  document.addEventListener("submit", function () { source.close(); });
})();
`;

/** The header the live-lists script sends with its refreshes: a page may skip what no live region shows (live.tsx, isLiveRefresh). */
export const LIVE_REFRESH_HEADER = "Docket-Live-Refresh";

/**
 * Live lists: every element with data-live and an id is swapped for its namesake in a fresh copy of
 * the page's own URL, every data-poll-ms (DASHBOARD_LIVE_POLL_MS) while the tab is visible. The
 * status line (#live-status, made if the page has none) says when it last updated, when it paused,
 * and when a refresh failed; after data-failures-max (DASHBOARD_LIVE_FAILURES_MAX) failures in a
 * row, or a session that ended, it stops and says so. A region the reader is using (focus inside,
 * a ticked confirmation box) is left for the next refresh, so a form is never reset under them.
 */
const LIVE_LISTS_JS = `(function () {
  var me = document.currentScript, regions = document.querySelectorAll("[data-live][id]");
  if (!me || !window.fetch || !window.DOMParser || regions.length === 0) return;
  var pollMs = Number(me.dataset.pollMs) || 5000, failuresMax = Number(me.dataset.failuresMax) || 3;
  var status = document.getElementById("live-status"), failures = 0, busy = false;
  if (!status) {
    status = document.createElement("p");
    status.id = "live-status";
    status.setAttribute("role", "status");
    regions[0].parentNode.insertBefore(status, regions[0]);
  }
  var seconds = Math.round(pollMs / 1000) + " s", every = "every " + seconds;
  function say(text, failed) { status.textContent = text; status.className = failed ? "warn" : "muted"; }
  ${SWAP_LIVE_REGIONS_JS}
  var timer = setInterval(refresh, pollMs);
  function stop(text) { clearInterval(timer); document.removeEventListener("visibilitychange", shown); say(text, true); }
  function failed(why) {
    failures += 1;
    if (failures >= failuresMax) return stop("Live updates stopped: " + failures + " refreshes in a row failed (" + why + "). Reload the page to try again.");
    say("A refresh failed (" + why + "); trying again in " + seconds + " (" + failures + " of " + failuresMax + ").", true);
  }
  function refresh() {
    if (busy) return;
    if (document.hidden) return say("Live updates paused while this tab is hidden.");
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html", "${LIVE_REFRESH_HEADER}": "1" } })
      .then(function (res) {
        if (res.redirected && /\\/sign-in$/.test(new URL(res.url).pathname)) return stop("Live updates stopped: your session has ended. Reload the page to sign in again.");
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.text().then(function (html) {
          swap(html);
          failures = 0;
          say("Live: updated at " + new Date().toISOString().slice(11, 19) + " UTC, " + every + ".");
        });
      })
      .catch(function (err) { failed(err && err.message ? err.message : String(err)); })
      .then(function () { busy = false; });
  }
  function shown() { if (!document.hidden) refresh(); }
  document.addEventListener("visibilitychange", shown);
  say("Live: this list updates " + every + ".");
})();
`;

/** The scripts by file name under /dash/assets/. */
export const DASH_SCRIPTS: Readonly<Record<string, string>> = { "live-events.js": LIVE_EVENTS_JS, "live-lists.js": LIVE_LISTS_JS };

export const LIVE_EVENTS_SCRIPT = `${DASH}/assets/live-events.js`;
/** The live lists' script: a page marks its regions data-live (with an id) and includes it through LiveUpdates (live.tsx). */
export const LIVE_LISTS_SCRIPT = `${DASH}/assets/live-lists.js`;
