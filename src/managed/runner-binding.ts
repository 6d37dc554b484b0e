// The container that runs a managed runner, as pools call it: a Durable Object per slot, named by
// its pool (`<org>:<pool>:<slot>`), behind the MANAGED_RUNNER binding. A deployment without
// Containers has no binding: its pools answer 501 managed_runners_unavailable instead of starting anything.

import type { Env } from "../env";
import { DocketError } from "../errors";

/** What a pool asks of one container (durable-objects/managed-runner.ts); launch is idempotent (a running container is left as it is). */
export interface ManagedRunnerApi {
  launch(spec: { registrationToken: string; name: string; labels: string[] }): Promise<void>;
  halt(): Promise<void>;
  runnerState(): Promise<{ running: boolean; startedAt: number | null; name: string | null }>;
}

/** The binding as the Worker's Env declares it (optional: Containers may be off). */
export type ManagedRunnerNamespace = DurableObjectNamespace<ManagedRunnerApi & Rpc.DurableObjectBranded>;

/** The container of one slot. */
export function runnerInstance(namespace: ManagedRunnerNamespace, instanceName: string): ManagedRunnerApi {
  return namespace.get(namespace.idFromName(instanceName)) as unknown as ManagedRunnerApi;
}

/** The slot's Durable Object name: keyed by what it belongs to, so two organizations never share one. */
export function instanceNameOf(orgId: string, poolId: string, slot: number): string {
  return `${orgId}:${poolId}:${slot}`;
}

/** The binding, or the 501 that says this deployment runs no containers. */
export function requireManagedRunners(env: Env): ManagedRunnerNamespace {
  const namespace = env.MANAGED_RUNNER as ManagedRunnerNamespace | undefined;
  if (!namespace) {
    throw new DocketError(
      "managed_runners_unavailable",
      "this deployment runs no managed runners: its wrangler.toml has no [[containers]] section and MANAGED_RUNNER binding (docs/managed-runners.md)",
      { binding: "MANAGED_RUNNER" },
    );
  }
  return namespace;
}
