// Process helpers for sandboxes that run as local process groups.
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Whether the process runs. A zombie does not: a listener killed outright stays one until its
 * parent reaps it, and its lock is free (lock.ts).
 */
export function pidAlive(pid: number) {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const state = statFields(pid)?.[0];
  return state !== 'Z' && state !== 'X';
}

/** The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, …), or null where /proc does not tell. */
function statFields(pid: number | string): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/**
 * Whether any process of the group still runs. A zombie does not count: a sandbox adopted after a
 * restart is not our child, and its exited leader stays a zombie until init gets round to it.
 */
export function groupAlive(pgid: number) {
  try {
    process.kill(-pgid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const live = liveGroupMembers(pgid);
  return live === null ? true : live > 0;
}

/** Non-zombie members of a process group, from /proc; null where /proc is not there. */
function liveGroupMembers(pgid: number) {
  let entries;
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  let live = 0;
  for (const name of entries) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    const fields = statFields(name);
    if (!fields) continue; // it exited while we looked
    if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') live += 1;
  }
  return live;
}

/**   @returns whether the signal was sent */
export function signalProcess(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**   @returns whether the signal was sent */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  return signalProcess(-pgid, signal);
}

/**
 * The kernel's start time of a process (field 22 of /proc/<pid>/stat), to tell a reused pid from
 * the original. Null where /proc is not available.
 */
export function processStartTicks(pid: number): string | null {
  return statFields(pid)?.[19] ?? null; // field 22 overall = index 19 after fields 1-2
}

export function sleep(ms: number, signal?: AbortSignal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(undefined);
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve(undefined);
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
