// A run's patch lives beside the run row, in chunks: SQLite in a Durable Object refuses any string
// or row over 2 MB, and a patch may be larger. The run row keeps only where the patch is.

import { eq } from "drizzle-orm";
import type { RunRecord } from "../src/run/types";
import { artifactChunks } from "./run-schema";
import type { StoreDb } from "./store";

/** Characters per chunk: at most 4 bytes each in UTF-8, so a chunk stays well under the limit. */
const CHUNK_CHARS = 256 * 1024;

export class ArtifactStore {
  /** Its table: artifact_chunks (durable-objects/run-schema.ts). */
  constructor(private readonly db: StoreDb) {}

  /**
   * Moves a newly reported patch out of the record into chunks; call inside the transaction that
   * writes the record. The record then names the attempt whose chunks hold the patch.
   */
  stash(run: RunRecord): RunRecord {
    const artifact = run.artifact;
    if (!artifact || artifact.patchAttempt !== undefined || artifact.patch.length === 0) return run;
    this.db.delete(artifactChunks).where(eq(artifactChunks.attempt, run.attempt)).run();
    for (let idx = 0; idx * CHUNK_CHARS < artifact.patch.length; idx++) {
      const data = artifact.patch.slice(idx * CHUNK_CHARS, (idx + 1) * CHUNK_CHARS);
      this.db.insert(artifactChunks).values({ attempt: run.attempt, idx, data }).run();
    }
    return { ...run, artifact: { ...artifact, patch: "", patchAttempt: run.attempt } };
  }

  /** The record with its patch read back whole. */
  restore(run: RunRecord): RunRecord {
    const artifact = run.artifact;
    if (!artifact || artifact.patchAttempt === undefined) return run;
    const chunks = this.db
      .select({ data: artifactChunks.data })
      .from(artifactChunks)
      .where(eq(artifactChunks.attempt, artifact.patchAttempt))
      .orderBy(artifactChunks.idx)
      .all();
    const { patchAttempt: _stored, ...rest } = artifact;
    return { ...run, artifact: { ...rest, patch: chunks.map((c) => c.data).join("") } };
  }
}
