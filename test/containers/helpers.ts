// Helpers of the containers tests: the engine test/containers/engine.mjs prepared (or why not), a
// slot's ManagedRunner object, the sample agent's path in the runner's image, and a bounded wait.

import { env } from "cloudflare:workers";
import { inject } from "vitest";
import type { ManagedRunner } from "../../durable-objects/managed-runner";

declare module "vitest" {
  export interface ProvidedContext {
    containersEngine: { ok: boolean; why: string };
  }
}

/** The sample agent (scripts/demo-agent.mjs) where containers/runner/Dockerfile puts it. */
export const AGENT = "/opt/docket-runner/demo-agent.mjs";

/** Whether containers can run here; when not, says in one line which tests are skipped and why. */
export function containersEngine(tests: string): boolean {
  const engine = inject("containersEngine");
  if (!engine.ok) console.warn(`${tests} skipped: no Docker engine (${engine.why}); .ci/run starts one (scripts/containers-engine.sh)`);
  return engine.ok;
}

/** A slot's container object, by the name its pool gives it (`<org>:<pool>:<slot>`). */
export function managedRunner(instanceName: string): DurableObjectStub<ManagedRunner> {
  const namespace = env.MANAGED_RUNNER as unknown as DurableObjectNamespace<ManagedRunner>;
  return namespace.get(namespace.idFromName(instanceName));
}

/** Reads until `done`, every half second, failing with the last value read after `timeoutMs`. */
export async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = await read();
  while (!done(last)) {
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 500));
    last = await read();
  }
  return last;
}
