// How a job ends once its sandbox is up: the daemon's own end read from final.json (a result, a
// checkpoint, a report that moved the run on), and a publication's push. shared/spec/dispatch-lifecycle.md.
import { join } from 'node:path';
import { classify, errorText } from './api.js';
import { JobAttempt } from './job-attempt.js';
import { readJson, removeWorkDir } from './launchers/common.js';
import type { Sandbox } from './launchers/launcher.js';
import { sleep } from './procs.js';
import { publish, publishPatch } from './publish.js';

/** How long a sandbox whose run just ended gets to exit by itself before it is removed. */
const ENDING_WAIT_MS = 5_000;
/** How long a sandbox whose daemon's own call paused or blocked the run gets to exit by itself before it is stopped. */
const MOVED_ON_EXIT_WAIT_MS = 30_000;
/** The most one git command of a publication (clone, commit, push) may take. */
const PUBLISH_GIT_TIMEOUT_MS = 120_000;

export class JobEnding extends JobAttempt {
  /**
   * A run that went terminal because the daemon delivered its final report is not a workload to
   * destroy: give the sandbox a moment to exit on its own and let final.json tell.
   */
  async endedByItsDaemon(sandbox: Sandbox) {
    const exited = await Promise.race([sandbox.exited.then(() => true), sleep(ENDING_WAIT_MS).then(() => false)]);
    return exited && readJson(join(this.paths.stateDir, 'final.json'))?.delivered === true;
  }

  /**
   * The server refused the lease because the run is paused or blocked: the daemon's checkpoint or
   * final report did that, and the sandbox exits by itself once the daemon has its answer. The job
   * ends as final.json says; a sandbox that does not exit in time is stopped (its files kept).
   */
  async afterRunMovedOn(sandbox: Sandbox, state: string) {
    const waited = new AbortController();
    const exited = await Promise.race([
      sandbox.exited.then(() => true),
      sleep(MOVED_ON_EXIT_WAIT_MS, AbortSignal.any([waited.signal, this.runner.stopSignal])).then(() => false),
    ]);
    waited.abort();
    if (!exited && this.runner.stopping) return this.leaveRunning();
    const final = readJson(join(this.paths.stateDir, 'final.json'));
    if (exited && (final?.checkpoint_delivered || final?.delivered)) return this.finishExited(await sandbox.exited);
    if (!exited) {
      this.out.run('stopping', this.view, `the run is ${state} but its sandbox did not exit: stopping it (files kept)`, { state });
      await sandbox.stop(this.runner.cfg.stop_grace_ms);
    }
    const how = exited ? 'the sandbox ended without saying how' : 'the sandbox did not exit by itself and was stopped';
    return this.finish(state, `the run is ${state} on the server; ${how}`);
  }

  /** Print a phase change the daemon wrote to its status file. */
  pollPhase() {
    const status = readJson(join(this.paths.stateDir, 'status.json'));
    if (status?.phase && status.phase !== this.phase) {
      this.phase = status.phase;
      this.db.update(this.runId, this.attempt, { phase: this.phase });
      this.out.run('phase', this.view, `phase ${this.phase}`);
    }
  }

  /**
   * The sandbox ended on its own. The daemon says in final.json whether its final report got through.
   */
  async finishExited(exit: { code: number | null; signal: string | null }) {
    this.pollPhase();
    const final = readJson(join(this.paths.stateDir, 'final.json'));
    if (final?.checkpoint_delivered) {
      const state = final.answer_state ?? 'paused';
      // A stop request pending at the pause makes the stored checkpoint cancel the run instead.
      this.finish('paused', state === 'paused' ? 'checkpoint stored' : `checkpoint stored; the run is ${state}`);
      removeWorkDir(this.paths); // the work is on the server as the checkpoint's patch
      return;
    }
    if (final?.delivered) {
      let outcome = final.answer_state ?? final.outcome;
      if (outcome === 'publishing') {
        // The run waits for this push (its lease is this job's): it comes before anything else.
        if (!(await this.pushWork(() => publish(this.runner.client, this.publishJob())))) return;
        outcome = 'pushed';
      }
      const costReview = final.cost_uncertain === true || this.aboveCostThreshold(final.cost_cents);
      const reason = final.outcome === 'failed' ? `the agent failed (exit codes ${JSON.stringify(final.exit_codes)})` : null;
      if (costReview) {
        this.move('cost-review', { outcome, cost_cents: final.cost_cents ?? null, ended_at_ms: Date.now(), reason: 'the reported cost is uncertain or above the review threshold' });
        this.out.run('cost_review', this.view, `ended ${outcome}; the cost needs review`, { outcome, cost_cents: final.cost_cents ?? null });
        return;
      }
      this.finish(outcome, reason, { cost_cents: final.cost_cents ?? null });
      removeWorkDir(this.paths); // the patch is on the server; logs stay
      return;
    }
    if (final?.attempt_over) {
      return this.finish('lost', `the daemon was told ${final.attempt_over}; this attempt is over`);
    }
    const code = exit.code ?? (final?.exit_codes ? JSON.stringify(final.exit_codes) : 'unknown');
    const why = final?.error ? `: ${final.error}` : '';
    return this.reportStopped(`the sandbox exited (code ${code}) without delivering a final report${why}`);
  }

  publishJob() {
    return { runId: this.runId, attempt: this.attempt, workDir: this.paths.workDir, cloneDir: this.paths.publishDir, timeoutMs: PUBLISH_GIT_TIMEOUT_MS };
  }

  /** A publication continuation's push-only job: the stored patch at its revision, pushed; no agent runs. */
  async pushOnly() {
    const p = this.claim.publication;
    this.out.run('publishing', this.view, `push-only job: applying the stored patch at ${p.source_revision ?? 'HEAD'}`);
    removeWorkDir(this.paths);
    if (await this.pushWork(() => publishPatch(this.runner.client, { ...this.publishJob(), sourceRevision: p.source_revision, patch: p.patch }))) {
      this.finish('pushed', null);
      removeWorkDir(this.paths);
    }
  }

  /**
   * Pushes the publication branch and reports it; true when that was done. A refusal is handled
   * like any attempt call's; a push that failed is reported as stopped, which leaves the
   * publication paused and resumable.
   */
  async pushWork(push: () => Promise<{ branch: string; headSha: string; state: string }>): Promise<boolean> {
    try {
      const r = await push();
      this.out.run('pushed', this.view, `pushed ${r.headSha} to ${r.branch}; the run is ${r.state}`, { branch: r.branch, head_sha: r.headSha });
      return true;
    } catch (e) {
      const kind = classify(e);
      if (kind === 'definitive' || kind === 'attempt_over') await this.afterRefusal({ kind, error: e }, { alreadyStopped: true });
      else {
        this.out.run('push_failed', this.view, `the publication push failed: ${errorText(e)}`, { error: errorText(e) });
        await this.reportStopped(`the publication push failed: ${errorText(e)}`);
      }
      return false;
    }
  }

  aboveCostThreshold(costCents: number | null | undefined) {
    const limit = this.runner.cfg.cost_review_above_cents;
    return typeof limit === 'number' && typeof costCents === 'number' && costCents > limit;
  }

}
