// The contract of Docket's HTTP API, shared by the Worker (src/routes/ validate with it and the
// OpenAPI document is generated from it) and the runner CLI (runner-cli/src/api.ts decodes every
// answer with it). Plain zod: nothing here may import the Worker's runtime or Node.

export * from "./bounds.js";
export * from "./builds.js";
export * from "./common.js";
export * from "./credits.js";
export * from "./errors.js";
export * from "./runs.js";
export * from "./tokens.js";
export * from "./version.js";
export * from "./runners.js";
export * from "./autopilot.js";
export * from "./autopilot-scheduler.js";
export * from "./run-reservations.js";
export * from "./managed.js";
