// The latest checkpoint's patch and session text, in chunks beside the run row (the row keeps only
// their description, src/run/types.ts Checkpoint): SQLite in a Durable Object refuses any string or
// row over 2 MB. Written in the transaction that stores the checkpoint; a new one replaces the old.

/** Characters per chunk: at most 4 bytes each in UTF-8, so a chunk stays well under the limit. */
const CHUNK_CHARS = 256 * 1024;

type Part = "patch" | "session";

export class CheckpointStore {
  /** Its table is made by the run object's schema steps (durable-objects/run-schema.ts). */
  constructor(private readonly sql: SqlStorage) {}

  /** Replaces the stored checkpoint's patch and session; call inside the storing transaction. */
  write(patch: string, session: string | null): void {
    this.sql.exec("DELETE FROM checkpoint_chunks");
    this.writePart("patch", patch);
    if (session !== null) this.writePart("session", session);
  }

  read(): { patch: string; session: string | null } {
    return { patch: this.readPart("patch") ?? "", session: this.readPart("session") };
  }

  private writePart(part: Part, text: string): void {
    for (let idx = 0; idx * CHUNK_CHARS < text.length; idx++) {
      this.sql.exec("INSERT INTO checkpoint_chunks (part, idx, data) VALUES (?, ?, ?)", part, idx, text.slice(idx * CHUNK_CHARS, (idx + 1) * CHUNK_CHARS));
    }
    // An empty part is one empty chunk, so "empty" and "absent" stay apart.
    if (text.length === 0) this.sql.exec("INSERT INTO checkpoint_chunks (part, idx, data) VALUES (?, 0, '')", part);
  }

  private readPart(part: Part): string | null {
    const rows = this.sql.exec<{ data: string }>("SELECT data FROM checkpoint_chunks WHERE part = ? ORDER BY idx", part).toArray();
    return rows.length === 0 ? null : rows.map((r) => r.data).join("");
  }
}
