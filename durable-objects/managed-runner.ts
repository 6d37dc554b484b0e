// A managed runner: the ordinary runner CLI (`docket-runner register`, then `listen --launcher
// process`) in a Cloudflare Container, one Durable Object per pool slot, named by the caller
// (`<org>:<pool>:<slot>`, src/managed/runner-binding.ts). The image is containers/runner.
//
// It speaks only the public protocol (spec/dispatch-lifecycle.md, "Decisions": the managed runner
// "speaks the exact same HTTP protocol as the open-source Docker runner ... there is no privileged
// internal path"): it registers with a registration token minted through POST /v1/tokens, and
// everything after is a machine's claims, leases and reports. Its HTTP to Docket's URL
// (MANAGED_RUNNER_DOCKET_URL) is intercepted by the Containers runtime and served by this Worker's
// own fetch handler, the same routes any runner calls, so the runner's traffic never leaves the
// deployment, and a local run never leaves loopback and the engine's bridge. What it does after its
// registration, the pools see as they see any machine (its heartbeats, its leases lapsing).
//
// Contract with the pools (src/managed/runner-binding.ts, ManagedRunnerApi): launch and halt as
// agreed; CHANGED: state() is runnerState() (same answer). The base class keeps its own `state`
// field, which would shadow a method of that name on every instance and break the RPC call.

import { Container, type OutboundHandler } from "@cloudflare/containers";
import { exports } from "cloudflare:workers";
import { loadConfig } from "../src/config";
import type { Env } from "../src/env";
import { DocketError } from "../src/errors";
import { log } from "../src/lib/log";

/** What this object keeps: the runner it launched (the container's own state the class keeps itself). */
interface Launched {
  name: string;
  startedAtMs: number;
}
const LAUNCHED_KEY = "managed:launched";

/**
 * The container's HTTP to Docket, handed to this Worker's fetch handler as any request from outside
 * is: its routes, its authentication, its limits. One log line per call says what a managed runner calls.
 */
const servedByDocket: OutboundHandler<Env> = async (request, _env, context) => {
  const response = await exports.default.fetch(request);
  const { pathname } = new URL(request.url);
  log("managed_runner.call", { reason: "container_http", container: context.containerId, method: request.method, path: pathname, status: response.status });
  return response;
};

/** The port containers/runner/start.sh answers on (its Dockerfile EXPOSEs it): the base class counts a container started once it answers. */
const READY_PORT = 8080;

export class ManagedRunner extends Container<Env> {
  defaultPort = READY_PORT;

  constructor(ctx: DurableObjectState<{}>, env: Env) {
    super(ctx, env);
    // Docket's host is configuration, so the interception is registered once the environment is
    // known, before the base class reads it (after its first await).
    ManagedRunner.outboundByHost = { [docketHost(env)]: servedByDocket };
  }

  /** Starts this slot's runner, or leaves a running one as it is. */
  async launch(spec: { registrationToken: string; name: string; labels: string[] }): Promise<void> {
    if (!spec.registrationToken || !spec.name) throw new DocketError("invalid_request", "a managed runner's launch needs a registration token and a runner name");
    if (this.ctx.container?.running) return;
    await this.start({
      envVars: {
        DOCKET_SERVER_URL: loadConfig(this.env).managedRunnerDocketUrl,
        DOCKET_REGISTRATION_TOKEN: spec.registrationToken,
        DOCKET_RUNNER_NAME: spec.name,
        DOCKET_LABELS: spec.labels.join(","),
      },
    });
    const launched: Launched = { name: spec.name, startedAtMs: Date.now() };
    await this.ctx.storage.put(LAUNCHED_KEY, launched);
    log("managed_runner.launched", { reason: "launch", runner: spec.name });
  }

  /** Stops the container: the runner gets SIGTERM and ends as a runner does (its sandboxes stopped). */
  async halt(): Promise<void> {
    if (this.ctx.container?.running) await this.stop("SIGTERM");
  }

  async runnerState(): Promise<{ running: boolean; startedAt: number | null; name: string | null }> {
    const launched = await this.ctx.storage.get<Launched>(LAUNCHED_KEY);
    return { running: this.ctx.container?.running ?? false, startedAt: launched?.startedAtMs ?? null, name: launched?.name ?? null };
  }

  /** No request ever reaches the container, so it is never idle by the base class's measure: its pool decides when it stops. */
  override async onActivityExpired(): Promise<void> {}

  override onStop(params: { exitCode: number; reason: string }): void {
    log("managed_runner.stopped", { reason: params.reason, exit_code: params.exitCode });
  }
}

function docketHost(env: Env): string {
  return new URL(loadConfig(env).managedRunnerDocketUrl).hostname;
}
