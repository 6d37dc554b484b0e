// Bounded input (docs/protocol.md, "Limits"): a request body over its byte limit is refused with
// 413 before it is parsed, and a parsed value over its configured bound is 400 naming the field.
// The schemas next to each route hold the hard ceilings (BOUND_CEILINGS); the configured bounds,
// which may be lower, are checked here after the parse.

import { bodyLimit } from "hono/body-limit";
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "./app-types";
import type { Config } from "./config";
import { DocketError } from "./errors";
import { checkOutboundUrl } from "./lib/outbound-address";
import { DEFAULT_LAUNCH_PROTOCOL } from "./run/launch";

/** Daemon reports carry the patch, so they get their own, larger limit. */
const REPORT_PATH = /^\/v1\/runs\/[^/]+\/reports\/?$/;
/** So do checkpoints. */
const CHECKPOINT_PATH = /^\/v1\/runs\/[^/]+\/attempts\/[^/]+\/checkpoint\/?$/;

/**
 * Refuses a body over its limit, by Content-Length when sent, else while the stream is read (a
 * chunked body is never buffered past the limit).
 */
export const boundedBody = createMiddleware<AppEnv>((c, next) => {
  const config = c.get("config");
  const maxBytes = REPORT_PATH.test(c.req.path) || CHECKPOINT_PATH.test(c.req.path) ? config.reportBodyMaxBytes : config.requestBodyMaxBytes;
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new DocketError("payload_too_large", `the request body is larger than ${maxBytes} bytes`, { max_bytes: maxBytes });
    },
  });
  return limit(c, next);
});

/** A count or size over its configured bound is 400 invalid_request naming the field. */
export function atMost(field: string, actual: number, max: number, unit: string): void {
  if (actual > max) {
    throw new DocketError("invalid_request", `body ${field}: has ${actual} ${unit}, at most ${max} allowed`, { field, max });
  }
}

interface LaunchInput {
  protocol?: string;
  env?: Record<string, string>;
}

/** A launch no runner of this deployment could take (its protocol not in LAUNCH_PROTOCOLS) is refused, as are oversized envs. */
export function checkLaunch(config: Config, launch: LaunchInput, at = "launch"): void {
  const protocol = launch.protocol ?? DEFAULT_LAUNCH_PROTOCOL;
  if (!config.launchProtocols.includes(protocol)) {
    const served = config.launchProtocols.join(", ");
    throw new DocketError("invalid_request", `body ${at}.protocol: ${JSON.stringify(protocol)} is not a launch protocol of this deployment (${served})`, {
      field: `${at}.protocol`,
    });
  }
  const env = Object.entries(launch.env ?? {});
  atMost(`${at}.env`, env.length, config.launchEnvMaxKeys, "keys");
  const chars = env.reduce((sum, [name, value]) => sum + name.length + value.length, 0);
  atMost(`${at}.env`, chars, config.launchEnvMaxChars, "characters in names and values");
}

export function checkLabels(config: Config, labels: string[] | undefined): void {
  atMost("labels", labels?.length ?? 0, config.labelsMax, "labels");
}

export function checkDispatch(
  config: Config,
  body: { brief: string; labels?: string[]; launch: LaunchInput; metadata?: Record<string, string>; callback_url?: string | null },
): void {
  atMost("brief", body.brief.length, config.briefMaxChars, "characters");
  if (body.callback_url) checkOutboundUrl(config, "callback_url", body.callback_url);
  checkLabels(config, body.labels);
  checkLaunch(config, body.launch);
  atMost("metadata", Object.keys(body.metadata ?? {}).length, config.metadataMaxKeys, "keys");
}

export function checkProject(config: Config, body: { labels?: string[]; launch: LaunchInput }): void {
  checkLabels(config, body.labels);
  checkLaunch(config, body.launch);
}

export function checkReport(config: Config, body: { lines?: string[]; final?: { artifact?: { patch: string } | null; blocker?: BlockerBounded } | null }): void {
  atMost("lines", body.lines?.length ?? 0, config.reportLinesMax, "lines");
  const patch = body.final?.artifact?.patch;
  if (patch !== undefined) atMost("final.artifact.patch", patch.length, config.artifactPatchMaxChars, "characters");
  if (body.final?.blocker) checkBlocker(config, body.final.blocker, "final.blocker");
}

interface BlockerBounded {
  summary: string;
  evidence: string[];
  questions: string[];
  human_action: string;
}

/** A blocker's texts and lists within BLOCKER_TEXT_MAX_CHARS and BLOCKER_ITEMS_MAX. */
function checkBlocker(config: Config, blocker: BlockerBounded, at: string): void {
  atMost(`${at}.summary`, blocker.summary.length, config.blockerTextMaxChars, "characters");
  atMost(`${at}.human_action`, blocker.human_action.length, config.blockerTextMaxChars, "characters");
  for (const list of ["evidence", "questions"] as const) {
    atMost(`${at}.${list}`, blocker[list].length, config.blockerItemsMax, "items");
    blocker[list].forEach((item, i) => atMost(`${at}.${list}[${i}]`, item.length, config.blockerTextMaxChars, "characters"));
  }
}
