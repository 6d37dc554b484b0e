// The latest checkpoint's patch and session text, in chunks beside the run row (the row keeps only
// their description, src/run/types.ts Checkpoint): SQLite in a Durable Object refuses any string or
// row over 2 MB. Written in the transaction that stores the checkpoint; a new one replaces the old.

import { eq } from "drizzle-orm";
import { checkpointChunks } from "./run-schema";
import type { StoreDb } from "./store";

/** Characters per chunk: at most 4 bytes each in UTF-8, so a chunk stays well under the limit. */
const CHUNK_CHARS = 256 * 1024;

type Part = "patch" | "session";

export class CheckpointStore {
  /** Its table: checkpoint_chunks (durable-objects/run-schema.ts). */
  constructor(private readonly db: StoreDb) {}

  /** Replaces the stored checkpoint's patch and session; call inside the storing transaction. */
  write(patch: string, session: string | null): void {
    this.db.delete(checkpointChunks).run();
    this.writePart("patch", patch);
    if (session !== null) this.writePart("session", session);
  }

  read(): { patch: string; session: string | null } {
    return { patch: this.readPart("patch") ?? "", session: this.readPart("session") };
  }

  private writePart(part: Part, text: string): void {
    for (let idx = 0; idx * CHUNK_CHARS < text.length; idx++) {
      this.db.insert(checkpointChunks).values({ part, idx, data: text.slice(idx * CHUNK_CHARS, (idx + 1) * CHUNK_CHARS) }).run();
    }
    // An empty part is one empty chunk, so "empty" and "absent" stay apart.
    if (text.length === 0) this.db.insert(checkpointChunks).values({ part, idx: 0, data: "" }).run();
  }

  private readPart(part: Part): string | null {
    const rows = this.db
      .select({ data: checkpointChunks.data })
      .from(checkpointChunks)
      .where(eq(checkpointChunks.part, part))
      .orderBy(checkpointChunks.idx)
      .all();
    return rows.length === 0 ? null : rows.map((r) => r.data).join("");
  }
}
