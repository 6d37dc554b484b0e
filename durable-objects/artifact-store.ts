// A run's patch lives beside the run row, in chunks: SQLite in a Durable Object refuses any string
// or row over 2 MB, and a patch may be larger. The run row keeps only where the patch is.

import type { RunRecord } from "../src/run/types";

/** Characters per chunk: at most 4 bytes each in UTF-8, so a chunk stays well under the limit. */
const CHUNK_CHARS = 256 * 1024;

export class ArtifactStore {
  /** Its table is made by the run object's schema steps (durable-objects/run-schema.ts). */
  constructor(private readonly sql: SqlStorage) {}

  /**
   * Moves a newly reported patch out of the record into chunks; call inside the transaction that
   * writes the record. The record then names the attempt whose chunks hold the patch.
   */
  stash(run: RunRecord): RunRecord {
    const artifact = run.artifact;
    if (!artifact || artifact.patchAttempt !== undefined || artifact.patch.length === 0) return run;
    this.sql.exec("DELETE FROM artifact_chunks WHERE attempt = ?", run.attempt);
    for (let idx = 0; idx * CHUNK_CHARS < artifact.patch.length; idx++) {
      const data = artifact.patch.slice(idx * CHUNK_CHARS, (idx + 1) * CHUNK_CHARS);
      this.sql.exec("INSERT INTO artifact_chunks (attempt, idx, data) VALUES (?, ?, ?)", run.attempt, idx, data);
    }
    return { ...run, artifact: { ...artifact, patch: "", patchAttempt: run.attempt } };
  }

  /** The record with its patch read back whole. */
  restore(run: RunRecord): RunRecord {
    const artifact = run.artifact;
    if (!artifact || artifact.patchAttempt === undefined) return run;
    const chunks = this.sql
      .exec<{ data: string }>("SELECT data FROM artifact_chunks WHERE attempt = ? ORDER BY idx", artifact.patchAttempt)
      .toArray();
    const { patchAttempt: _stored, ...rest } = artifact;
    return { ...run, artifact: { ...rest, patch: chunks.map((c) => c.data).join("") } };
  }
}
