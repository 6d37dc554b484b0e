// The dashboard's scripts, served as files of their own under /dash/assets/ so the pages' Content
// Security Policy allows scripts from this origin only, never inline ones (src/dashboard/routes.tsx).

import { DASH } from "./session";

/** Live events on a run's page: the run's stream through the dashboard, appended as they come; the page reloads when the run ends. */
const LIVE_EVENTS_JS = `(function () {
  var list = document.getElementById("events"), state = document.getElementById("run-state");
  if (!window.EventSource || !list) return;
  var source = new EventSource(list.dataset.stream + "?after=" + list.dataset.after);
  source.onmessage = function (m) {
    var e = JSON.parse(m.data), li = document.createElement("li");
    li.textContent = "#" + e.seq + " " + new Date(e.at_ms).toISOString() + " " + e.type + " " + JSON.stringify(e.data);
    list.appendChild(li);
    if (e.type === "run.state" && state) state.textContent = e.data.to;
  };
  source.addEventListener("end", function () { source.close(); location.reload(); });
  // A form sent from this page (cancel) navigates away: a reload on the run's end must not overtake it.
  document.addEventListener("submit", function () { source.close(); });
})();
`;

/** The scripts by file name under /dash/assets/. */
export const DASH_SCRIPTS: Readonly<Record<string, string>> = { "live-events.js": LIVE_EVENTS_JS };

export const LIVE_EVENTS_SCRIPT = `${DASH}/assets/live-events.js`;
