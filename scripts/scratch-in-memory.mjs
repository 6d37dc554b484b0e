// Throwaway local state in memory. The tests' and the benchmarks' local Workers keep their Durable
// Objects, D1 and Queues under the temp directory, and every local commit is an fsync on the one
// thread of local workerd: on disk the commits made the suite about a fifth slower and were the
// largest part of the benchmarks' spread from run to run (docs/BENCHMARKS.md, "Where local state
// is kept"). So on a machine with /dev/shm (memory) and at least SCRATCH_MIN_FREE_BYTES free there,
// TMPDIR is set to it, for this process and the processes it starts. A TMPDIR already set is kept:
// it is how to choose another place.

import { accessSync, constants, statfsSync } from "node:fs";
import { tmpdir } from "node:os";

const SCRATCH_MIN_FREE_BYTES = 2 * 1024 ** 3;

/**
 * Puts the temp directory in memory when it can, and answers where it is.
 * @returns {{ dir: string, inMemory: boolean }}
 */
export function scratchInMemory() {
  const set = process.env.TMPDIR;
  if (set) return { dir: set, inMemory: set === "/dev/shm" || set.startsWith("/dev/shm/") };
  try {
    accessSync("/dev/shm", constants.W_OK);
    const { bavail, bsize } = statfsSync("/dev/shm");
    if (bavail * bsize >= SCRATCH_MIN_FREE_BYTES) {
      process.env.TMPDIR = "/dev/shm";
      return { dir: "/dev/shm", inMemory: true };
    }
  } catch {
    // No /dev/shm here (macOS, Windows): the temp directory stays where it is.
  }
  return { dir: tmpdir(), inMemory: false };
}
