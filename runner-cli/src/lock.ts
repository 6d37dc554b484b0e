// One listener per data directory: a lock file holding the owner's pid and process start time.
// A lock whose process is gone (or whose pid now belongs to another process) is stale and taken over.
import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processStartTicks, pidAlive } from './procs.js';

export class LockedError extends Error {
  pid: number;
  constructor(message: string, pid: number) {
    super(message);
    this.name = 'LockedError';
    this.pid = pid;
  }
}

/**
 * Who holds the lock of a data directory, if anyone alive does.
 */
export function lockHolder(dataDir: string): { pid: number; started_at_ms?: number }|null {
  let info;
  try {
    info = JSON.parse(readFileSync(join(dataDir, 'listen.lock'), 'utf8'));
  } catch {
    return null;
  }
  if (!info || !Number.isSafeInteger(info.pid)) return null;
  if (!pidAlive(info.pid)) return null;
  // The pid may have been reused after a crash: the start time tells the processes apart.
  if (info.start_ticks && processStartTicks(info.pid) && processStartTicks(info.pid) !== info.start_ticks) return null;
  return info;
}

/**
 * Take the lock or throw LockedError. Returns a release function.
 */
export function acquireLock(dataDir: string) {
  const path = join(dataDir, 'listen.lock');
  const tmp = `${path}.${process.pid}`;
  const info = { pid: process.pid, start_ticks: processStartTicks(process.pid), started_at_ms: Date.now() };
  writeFileSync(tmp, JSON.stringify(info) + '\n', { mode: 0o600 });
  try {
    for (let tries = 0; tries < 3; tries++) {
      try {
        linkSync(tmp, path); // atomic: fails if the lock exists
        let released = false;
        return () => {
          if (released) return;
          released = true;
          try {
            const now = JSON.parse(readFileSync(path, 'utf8'));
            if (now.pid === process.pid) unlinkSync(path);
          } catch {
            // already gone
          }
        };
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const holder = lockHolder(dataDir);
      if (holder) {
        throw new LockedError(
          `another docket-runner listen (pid ${holder.pid}) is using ${dataDir}; stop it first or use another --data-dir`,
          holder.pid,
        );
      }
      try {
        unlinkSync(path); // stale: its owner is gone
      } catch {
        // someone else removed it first
      }
    }
    throw new LockedError(`could not take the lock ${path}`, 0);
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // ignore
    }
  }
}
