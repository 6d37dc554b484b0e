// The hard ceilings of the configurable input bounds, part of the contract: whatever a deployment
// configures (src/config.ts), a request over these is refused by the schemas.

/**
 * The hard ceiling of each configurable input bound: the request schemas refuse more whatever the
 * configuration says, so a bound may be lowered freely and raised only this far.
 */
export const BOUND_CEILINGS = {
  briefMaxChars: 100_000,
  labelsMax: 64,
  launchEnvMaxKeys: 1_000,
  launchEnvMaxChars: 1_000_000,
  metadataMaxKeys: 1_000,
  artifactPatchMaxChars: 20_000_000,
  reportLinesMax: 10_000,
  // A run is one row in its Durable Object's SQLite, which refuses rows over 2 MB.
  requestBodyMaxBytes: 1_900_000,
  // Autopilot: admitted waiting runs one project may hold.
  autopilotQueueCapacityMax: 10_000,
  // Blockers: one text of a blocker, and the items of its evidence and questions.
  blockerTextMaxChars: 20_000,
  blockerItemsMax: 100,
} as const;
