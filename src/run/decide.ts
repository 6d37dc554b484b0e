// The run's transition rules: a pure function (run, command, now) → next run, hops, events, or a
// refusal. No I/O: the RunObject applies the result in one transaction (../shared/STYLE.md).
// Spec: ../shared/spec/dispatch-lifecycle.md, "Decisions"; ../shared/DESIGN.md, "The run state machine".
// Each command has one rule, in src/run/rules/ by concern; this module only picks it.

import { decideClaim, decideCancel, decideLaunched, decideLaunchFailed, decideLease, decideStopped } from "./rules/attempt";
import { decideAuthorize, decideBlock } from "./rules/blocking";
import { Draft, type DecideConfig, type Decision, type Rule } from "./rules/draft";
import { decideCheckpoint, decideCheckpointUnusable, decidePause, decideQuiesced, decideResume } from "./rules/pause";
import { decidePublish, decidePublished, decidePublishFailed, decidePublishInterrupted, decidePublishTry, decidePushed } from "./rules/publishing";
import { decideRecovered, decideRecoveryFailed, reap } from "./rules/reaper";
import { decideReport } from "./rules/report";
import type { RunCommand, RunRecord } from "./types";

export type { DecideConfig, Decision };

/** One rule per command; decide() only picks the rule (dispatch-lifecycle.md, "Decisions"). */
const RULES: { [T in RunCommand["type"]]: Rule<T> } = {
  claim: decideClaim,
  launched: decideLaunched,
  lease: decideLease,
  launch_failed: decideLaunchFailed,
  stopped: decideStopped,
  report: decideReport,
  cancel: decideCancel,
  deadline: (d, command, config) => reap(d, config, command.recoveredAtMs, command.jitter),
  pause: decidePause,
  quiesced: decideQuiesced,
  resume: decideResume,
  checkpoint: decideCheckpoint,
  checkpoint_unusable: decideCheckpointUnusable,
  block: decideBlock,
  authorize: decideAuthorize,
  publish: decidePublish,
  pushed: decidePushed,
  publish_try: decidePublishTry,
  published: decidePublished,
  publish_interrupted: decidePublishInterrupted,
  publish_failed: decidePublishFailed,
  recovered: decideRecovered,
  recovery_failed: decideRecoveryFailed,
};

export function decide(input: RunRecord, command: RunCommand, now: number, config: DecideConfig): Decision {
  const d = new Draft(structuredClone(input), now, config.runStateHistoryMax);
  const rule = RULES[command.type] as Rule<RunCommand["type"]>;
  return rule(d, command, config);
}
