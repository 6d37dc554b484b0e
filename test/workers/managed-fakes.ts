// A stand-in for the MANAGED_RUNNER binding (src/managed/runner-binding.ts): each slot's container
// as a record of what the pool asked of it. A test that plays the container registers its runner
// through the public endpoint with the token the launch carried, as the real one does.

import { env } from "cloudflare:workers";
import type { ManagedRunnerApi, ManagedRunnerNamespace } from "../../src/managed/runner-binding";
import { callDirect } from "./direct";
import { CLI_VERSION } from "./helpers";

export interface FakeContainer {
  name: string;
  running: boolean;
  launches: { registrationToken: string; name: string; labels: string[] }[];
  halts: number;
}

export class FakeContainers {
  readonly byName = new Map<string, FakeContainer>();

  container(name: string): FakeContainer {
    if (!this.byName.has(name)) this.byName.set(name, { name, running: false, launches: [], halts: 0 });
    return this.byName.get(name)!;
  }

  /** The containers of one organization (their names start with its id: the D1 of a test file holds every test's pools). */
  of(orgId: string): FakeContainer[] {
    return [...this.byName.values()].filter((c) => c.name.startsWith(`${orgId}:`));
  }

  /** Every launch of the organization's containers, in order. */
  launches(orgId: string): FakeContainer["launches"] {
    return this.of(orgId).flatMap((c) => c.launches);
  }

  running(orgId: string): FakeContainer[] {
    return this.of(orgId).filter((c) => c.running);
  }

  namespace(): ManagedRunnerNamespace {
    const api = (name: string): ManagedRunnerApi => ({
      launch: async (spec) => {
        const c = this.container(name);
        if (c.running) return;
        c.running = true;
        c.launches.push(spec);
      },
      halt: async () => {
        const c = this.container(name);
        c.running = false;
        c.halts += 1;
      },
      runnerState: async () => {
        const c = this.container(name);
        return { running: c.running, startedAt: null, name: c.launches.at(-1)?.name ?? null };
      },
    });
    return { idFromName: (name: string) => ({ name }), get: (id: { name: string }) => api(id.name) } as unknown as ManagedRunnerNamespace;
  }
}

/** Puts fake containers in the MANAGED_RUNNER binding of this file's Worker. */
export function installFakeContainers(): FakeContainers {
  const containers = new FakeContainers();
  (env as { MANAGED_RUNNER?: ManagedRunnerNamespace }).MANAGED_RUNNER = containers.namespace();
  return containers;
}

/** Takes the binding away: a deployment without Containers. */
export function removeContainers(): void {
  delete (env as { MANAGED_RUNNER?: ManagedRunnerNamespace }).MANAGED_RUNNER;
}

/** What the container's runner does first: registers with the launch's token and name. */
export async function registerLaunched(launch: FakeContainer["launches"][number], protocols = ["process"]) {
  const res = await callDirect("POST", "/v1/runners/register", {
    token: launch.registrationToken,
    body: { name: launch.name, labels: launch.labels, protocols, cli_version: CLI_VERSION },
  });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${JSON.stringify(res.body)}`);
  return { machineId: res.body.machine_id as string, token: res.body.machine_token as string };
}
