// A claim's credentials, checked in its organization's scheduler: whether the machine token still
// works, the machine's labels, and whether a recovery holds dispatch (src/recovery.ts). Every claim
// of an organization passes through its one scheduler, and so does every deregistration of one of
// its machines and every heartbeat that sets a machine's labels (forget), so the scheduler can keep
// what it read: a token it verified stays verified until its machine is deregistered, which it is
// told before the deregistration answers (docs/protocol.md, "Runners"). A machine token is revoked
// in no other way, and its expiry is checked against the clock at every claim. The sweep row is read again after CLAIM_SWEEP_TTL_MS,
// and whenever the one kept would hold a claim: a recovery after an outage starts only once the
// last tick is older than SWEEP_OUTAGE_THRESHOLD_MS, and the row kept then holds claims itself.

import type { Config } from "../src/config";
import { machineDeregistered, refusalOf, type StoredToken, TOKEN_COLUMNS } from "../src/credentials/tokens";
import { asRefusal, refusal, type Refusal } from "../src/errors";
import { setBounded } from "../src/lib/bounded-map";
import { addD1, countedAll, type Cost } from "../src/lib/cost";
import { log } from "../src/lib/log";
import { RECOVERY_ROW_SQL, recoveryHold, type RecoveryRow } from "../src/recovery-hold";

/** A machine whose token this scheduler verified. */
export interface KnownMachine {
  token: StoredToken;
  machineId: string;
  labels: string[];
  deregistered: boolean;
  lastSeenAtMs: number;
}

/** What a claim's credentials allow: the machine it claims for, a 401 that says why not, or a recovery's hold. */
export type ClaimCredentials = { machine: KnownMachine } | Refusal | { held: string };

/** The token, its machine's row and the sweep row in one statement: a claim's only one before the queue when none is known. */
const TOKEN_WITH_MACHINE_SQL = `SELECT ${TOKEN_COLUMNS.split(", ").map((c) => `t.${c}`).join(", ")},
  m.labels AS machine_labels, m.deregistered_at_ms AS machine_deregistered_at_ms, m.last_seen_at_ms AS machine_last_seen_at_ms,
  s.last_tick_at_ms AS sweep_last_tick_at_ms, s.recovered_at_ms AS sweep_recovered_at_ms, s.recovery_done_at_ms AS sweep_recovery_done_at_ms
  FROM tokens t JOIN machines m ON m.id = t.machine_id LEFT JOIN sweep s ON s.id = 1 WHERE t.token_hash = ? AND t.org_id = ? AND t.kind = 'machine'`;

interface TokenWithMachine extends StoredToken {
  machine_labels: string;
  machine_deregistered_at_ms: number | null;
  machine_last_seen_at_ms: number;
  sweep_last_tick_at_ms: number | null;
  sweep_recovered_at_ms: number | null;
  sweep_recovery_done_at_ms: number | null;
}

export class ClaimCredentialsCache {
  /** Verified machine tokens by hash, oldest first (bounded by CLAIM_TOKENS_KNOWN_MAX). */
  private readonly known = new Map<string, KnownMachine>();
  /** Deregistrations told so far: a token read before one is not kept after it. */
  private forgets = 0;
  private sweep: { row: RecoveryRow | null; readAtMs: number } | null = null;
  /** The sweep row's read under way, shared by the claims that need it meanwhile. */
  private sweepRead: Promise<RecoveryRow | null> | null = null;

  constructor(
    private readonly db: D1Database,
    private readonly config: Config,
  ) {}

  async check(orgId: string, tokenHash: string, cost: Cost): Promise<ClaimCredentials> {
    const machine = this.known.get(tokenHash) ?? (await this.read(orgId, tokenHash, cost));
    if (!machine) return refusal("unauthorized", "unknown machine token: this organization has no such machine");
    const refused = refusalOf(machine.token, Date.now()) ?? (machine.deregistered ? machineDeregistered() : null);
    if (refused) return asRefusal(refused);
    const held = await this.recoveryHold(cost);
    return held ? { held } : { machine };
  }

  /** A machine deregistered (its token is found revoked at its next claim) or given new labels (read then). */
  forget(machineId: string): void {
    this.forgets += 1;
    for (const [hash, known] of this.known) if (known.machineId === machineId) this.known.delete(hash);
  }

  /**
   * A claim is the machine's heartbeat (its CLI version, protocols and last-seen time), so an idle
   * runner sends no other. Written at most once per heartbeat interval; its rows are counted in the
   * claim's cost, and a failed write is tried again by the next claim.
   */
  async touch(machine: KnownMachine, offered: { cli_version: string; protocols: string[] }, cost: Cost): Promise<void> {
    const now = Date.now();
    const since = now - this.config.heartbeatIntervalMs;
    if (machine.lastSeenAtMs >= since) return;
    const before = machine.lastSeenAtMs;
    machine.lastSeenAtMs = now;
    try {
      const result = await this.db
        .prepare("UPDATE machines SET last_seen_at_ms = ?, cli_version = ?, protocols = ? WHERE id = ? AND last_seen_at_ms < ?")
        .bind(now, offered.cli_version, JSON.stringify(offered.protocols), machine.machineId, since)
        .run();
      addD1(cost, result.meta);
    } catch (err) {
      // It runs beside the claim: a grant is never lost to a missed last-seen write.
      machine.lastSeenAtMs = before;
      log("runner.last_seen_failed", { machine: machine.machineId, reason: String(err) });
    }
  }

  private async read(orgId: string, tokenHash: string, cost: Cost): Promise<KnownMachine | null> {
    const forgets = this.forgets;
    const [row] = await countedAll<TokenWithMachine>(cost, this.db.prepare(TOKEN_WITH_MACHINE_SQL).bind(tokenHash, orgId));
    if (!row) return null;
    this.sweep = {
      row: row.sweep_last_tick_at_ms === null ? null : { last_tick_at_ms: row.sweep_last_tick_at_ms, recovered_at_ms: row.sweep_recovered_at_ms ?? 0, recovery_done_at_ms: row.sweep_recovery_done_at_ms ?? 0 },
      readAtMs: Date.now(),
    };
    const machine: KnownMachine = {
      token: row,
      machineId: row.machine_id!,
      labels: JSON.parse(row.machine_labels),
      deregistered: row.machine_deregistered_at_ms !== null,
      lastSeenAtMs: row.machine_last_seen_at_ms,
    };
    // A deregistration told while the row was on its way may not be in it: that read is used once.
    if (forgets === this.forgets) setBounded(this.known, tokenHash, machine, this.config.claimTokensKnownMax);
    return machine;
  }

  /** Why a claim must wait for a recovery, or null, from the sweep row kept or read again. */
  private async recoveryHold(cost: Cost): Promise<string | null> {
    const kept = this.sweep;
    const now = Date.now();
    if (kept && now - kept.readAtMs < this.config.claimSweepTtlMs && !recoveryHold(kept.row, now, this.config)) return null;
    if (!this.sweepRead) {
      this.sweepRead = countedAll<RecoveryRow>(cost, this.db.prepare(RECOVERY_ROW_SQL))
        .then(([row]) => {
          this.sweep = { row: row ?? null, readAtMs: now };
          return row ?? null;
        })
        .finally(() => (this.sweepRead = null));
    }
    return recoveryHold(await this.sweepRead, Date.now(), this.config);
  }
}
