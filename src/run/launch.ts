// A run's launch as Docket records it: what a run, a build project and an autopilot run template
// hand the runner (docs/protocol.md, "Runs": `launch.protocol` defaults to `process`).

import type { LaunchSpec } from "./types";

/** The protocol of a launch that names none. */
export const DEFAULT_LAUNCH_PROTOCOL = "process";

/** A launch as callers give it, with its defaults filled in. */
export function launchSpec(launch: { protocol?: string | null; command: string[]; image?: string | null; env?: Record<string, string> | null }): LaunchSpec {
  return { protocol: launch.protocol ?? DEFAULT_LAUNCH_PROTOCOL, command: launch.command, image: launch.image ?? null, env: launch.env ?? {} };
}
