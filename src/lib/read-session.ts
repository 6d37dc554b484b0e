// D1 read sessions for the member API's reads (docs/protocol.md, "Read your own writes"): a read
// may be answered by a D1 read replica near the Worker, and the bookmark that comes back in
// x-d1-bookmark, sent on the next call, makes that call see at least what this one saw or wrote.
// https://developers.cloudflare.com/d1/best-practices/read-replication/

import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../app-types";
import { DocketError } from "../errors";

export const BOOKMARK_HEADER = "x-d1-bookmark";

/** D1 bookmarks are dash-separated hex groups; anything else is refused before D1 sees it. */
const BOOKMARK = /^[0-9a-f]{1,64}(-[0-9a-f]{1,64}){0,15}$/i;

/** The client's bookmark, or null without one; a malformed one is 400 invalid_request. */
function bookmarkOf(header: string | undefined): string | null {
  if (header === undefined || header.trim() === "") return null;
  const bookmark = header.trim();
  if (!BOOKMARK.test(bookmark)) {
    throw new DocketError("invalid_request", `header ${BOOKMARK_HEADER}: not a D1 bookmark (dash-separated hex groups, as a previous answer returned it)`, {
      field: BOOKMARK_HEADER,
    });
  }
  return bookmark;
}

/**
 * Opens the request's D1 session as `c.var.db` and returns its bookmark in x-d1-bookmark. A read
 * (GET) starts at the client's bookmark, else anywhere (a replica will do); a write starts on the
 * primary, so the bookmark it returns follows what the write and the run objects it called stored.
 */
export const d1Session = createMiddleware<AppEnv>(async (c, next) => {
  const bookmark = bookmarkOf(c.req.header(BOOKMARK_HEADER));
  const session = c.env.DB.withSession(c.req.method === "GET" ? (bookmark ?? "first-unconstrained") : "first-primary");
  // A session answers prepare() and batch() like the database, which is all the reads here use.
  c.set("db", session as unknown as D1Database);
  await next();
  const latest = session.getBookmark() ?? bookmark;
  if (latest) c.res.headers.set(BOOKMARK_HEADER, latest);
});
