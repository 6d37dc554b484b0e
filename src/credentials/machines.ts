// Runner machines as members see them, and their deregistration: the machine leaves the list and its
// machine token is revoked in the same D1 batch. Attempts it holds are not ended here: it can no
// longer refresh their leases, so the reaper's rules take them back when the lease lapses
// (../shared/spec/dispatch-lifecycle.md, "Decisions"; docs/protocol.md, "Runners").

import { and, eq, isNull } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { machines, tokens } from "../db/schema";

export type MachineRow = typeof machines.$inferSelect;

export function machineView(m: MachineRow) {
  return {
    id: m.id,
    name: m.name,
    labels: JSON.parse(m.labels),
    protocols: JSON.parse(m.protocols),
    cli_version: m.cliVersion,
    registered_at_ms: m.registeredAtMs,
    last_seen_at_ms: m.lastSeenAtMs,
    deregistered_at_ms: m.deregisteredAtMs,
  };
}

/** Deregisters a machine of `orgId` and revokes its token in one batch; a second call changes nothing. */
export async function deregisterMachine(db: D1Database, orgId: string, machineId: string, nowMs: number): Promise<boolean> {
  const orm = drizzle(db);
  const [machine] = await orm.batch([
    orm
      .update(machines)
      .set({ deregisteredAtMs: nowMs })
      .where(and(eq(machines.id, machineId), eq(machines.orgId, orgId), isNull(machines.deregisteredAtMs))),
    orm
      .update(tokens)
      .set({ revokedAtMs: nowMs })
      .where(and(eq(tokens.machineId, machineId), eq(tokens.orgId, orgId), eq(tokens.kind, "machine"), isNull(tokens.revokedAtMs))),
  ]);
  return machine.meta.changes === 1;
}
