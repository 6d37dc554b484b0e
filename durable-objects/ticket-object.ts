// TicketObject: one per issue of one autopilot project (idFromName(ticketObjectName(project, key)),
// e.g. `apj_…:github:owner/repo#12`, src/autopilot/provider.ts): two organizations watching one
// repository never share a ticket, its generation or its history. It serializes everything that
// can admit a run for that ticket: webhooks, reconciliation, an operator's request
// (../shared/DESIGN.md, "Each ticket is a Durable Object too"; ../shared/spec/run-lifecycle.md,
// "Admission"). It keeps the readiness generation (the id of the
// ready transition that opened it), the webhook delivery ids it has seen, the id of its one
// unfinished run, a bounded history of admissions, refusals and lapses with their reasons, and the
// last time its issue could not be read.
// The Worker gathers the tracker's facts and applies the pure rules; this object decides.
//
// The class owns storage, the alarm and the entry points; the decisions live beside it:
// ticket-admission.ts (an observation: admit, refuse, wait, authorize), ticket-withdrawal.ts (the
// run it backs: a claim's answer, its end, a lapse's withdrawal), ticket-read.ts (what a reader
// sees), ticket-carry-over.ts (tickets kept before they were per project), ticket-store.ts (its
// SQLite) and ticket-index.ts (the project's index in D1).
//
// Memory: only `tail`, the queue of calls under way. Losing it on eviction is safe: an eviction
// ends the calls with it, and everything they decided is in storage.

import { DurableObject } from "cloudflare:workers";
import { loadConfig } from "../src/config";
import type { Env } from "../src/env";
import type { BackingAnswer, Observation, ObservationAnswer, TicketAddress, TicketState, TrackerLastError } from "../src/autopilot/ticket-types";
import { migrateOnStart, storeDb } from "./store";
import { TICKET_STORE } from "./stores";
import { decide } from "./ticket-admission";
import { carryOver } from "./ticket-carry-over";
import { indexLastError } from "./ticket-index";
import { readTicket } from "./ticket-read";
import { TicketStore, type TicketContext, type TicketRow } from "./ticket-store";
import { backing, unfinishedRun, withdrawLapsed } from "./ticket-withdrawal";

export type { BackingAnswer };

export class TicketObject extends DurableObject<Env> {
  private readonly ticket: TicketContext;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const config = loadConfig(env);
    const db = storeDb(ctx);
    migrateOnStart(ctx, db, TICKET_STORE);
    this.ticket = { env, config, store: new TicketStore(ctx.storage, db, config), setAlarm: (atMs) => ctx.storage.setAlarm(atMs) };
  }

  /**
   * One observation of the ticket, from any door. Serialized: a webhook racing a reconciliation
   * runs one after the other here, so the second sees the first's run and admits nothing.
   */
  async observe(obs: Observation): Promise<ObservationAnswer> {
    return this.serialized(async () => {
      await carryOver(this.env, this.ticket.store, { projectId: obs.project.id, ticketKey: obs.ticketKey });
      // The door read the issue (a capacity wait reads nothing): an earlier failure to read it is over.
      if (obs.capacityWait === undefined && this.ticket.store.lastError()) {
        this.ticket.store.clearError();
        await indexLastError(this.env, { projectId: obs.project.id, ticketKey: obs.ticketKey }, null);
      }
      return decide(this.ticket, obs);
    });
  }

  /**
   * A door could not read (or admit) the issue (src/autopilot/admission.ts): the ticket keeps why,
   * for its reader, until an observation reads the issue again. Nothing else of the ticket changes.
   */
  async readFailed(at: TicketAddress, error: TrackerLastError): Promise<void> {
    await this.serialized(async () => {
      await carryOver(this.env, this.ticket.store, at);
      this.ticket.store.recordError(error);
      await indexLastError(this.env, at, error);
    });
  }

  /**
   * Asked by a run object right before a claim hands out `runId`
   * (../shared/spec/run-lifecycle.md, "Queue and dispatch": current tracker eligibility). It reads
   * only what the ticket recorded (never the tracker), after any observation under way: the run is
   * backed while it is the ticket's run and no lapse of it is recorded.
   */
  async backs(runId: string, at: TicketAddress): Promise<BackingAnswer> {
    return this.serialized(async () => {
      await carryOver(this.env, this.ticket.store, at);
      return backing(this.ticket.store.load(), runId);
    });
  }

  /**
   * The outbox tells the ticket its run ended (src/autopilot/ticket-run-end.ts), so the ticket reads
   * `done` at once rather than at its next observation. Idempotent: only the ticket's own unfinished
   * run is recorded, once; the run object is read, never trusted from the event. A pending
   * admission is left to the next observation, which records its run first.
   */
  async runEnded(runId: string): Promise<boolean> {
    return this.serialized(async () => {
      const row = this.ticket.store.load();
      if (!row || row.run_id !== runId || row.pending_generation !== null) return false;
      return (await unfinishedRun(this.ticket, row, "run_end", Date.now())) === null;
    });
  }

  /** Retries the withdrawal of a lapsed ticket's run that failed (bounded by AUTOPILOT_WITHDRAW_ATTEMPTS_MAX). */
  async alarm(): Promise<void> {
    await this.serialized(async () => {
      const row = this.ticket.store.load();
      if (row?.withdraw_run_id) await withdrawLapsed(this.ticket, row, "withdraw_retry", Date.now());
    });
  }

  /** The ticket as GET …/tickets shows it, with its history (newest first). */
  async read(at: TicketAddress): Promise<TicketState | null> {
    await this.serialized(() => carryOver(this.env, this.ticket.store, at));
    return readTicket(this.ticket.store, at);
  }

  /**
   * What this object recorded for `projectId`, asked of an object named the old way (the bare key,
   * `github:Owner/Repo#12`, shared by every project watching the repository): see ticket-carry-over.ts.
   */
  async legacyRow(projectId: string): Promise<TicketRow | null> {
    return this.serialized(async () => {
      const row = this.ticket.store.load();
      return row?.project_id === projectId ? row : null;
    });
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}
