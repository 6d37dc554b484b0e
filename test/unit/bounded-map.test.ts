// The bound of the claim's token caches (CLAIM_TOKENS_KNOWN_MAX): the isolate's and each scheduler's.
import { describe, expect, it } from "vitest";
import { setBounded } from "../../src/lib/bounded-map";

describe("setBounded", () => {
  it("keeps at most max entries, pushing out the oldest for a new key", () => {
    const map = new Map<string, number>();
    for (const [i, key] of ["a", "b", "c", "d"].entries()) setBounded(map, key, i, 3);
    expect([...map.keys()]).toEqual(["b", "c", "d"]);
  });

  it("sets a key already there in place, pushing nothing out", () => {
    const map = new Map([["a", 1], ["b", 2]]);
    setBounded(map, "a", 3, 2);
    expect([...map.entries()]).toEqual([["a", 3], ["b", 2]]);
  });
});
