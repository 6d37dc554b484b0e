// Process helpers for sandboxes that run as local process groups.
import { readdirSync, readFileSync } from 'node:fs';

export function pidAlive(pid: number) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
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
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // it exited while we looked
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // state, ppid, pgrp, …
    if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') live += 1;
  }
  return live;
}

/**   @returns whether the signal was sent */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * The kernel's start time of a process (field 22 of /proc/<pid>/stat), to tell a reused pid from
 * the original. Null where /proc is not available.
 */
export function processStartTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19] ?? null; // field 22 overall = index 19 after fields 1-2
  } catch {
    return null;
  }
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
