// The Worker prints one JSON line per transition and per outbox delivery (src/lib/log.ts). Suites
// that make thousands of calls mute those lines; anything else still reaches the console.

import { vi } from "vitest";

export function muteTransitionLogs(): void {
  const log = console.log.bind(console);
  vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
    if (typeof args[0] === "string" && args[0].startsWith('{"msg"')) return;
    log(...args);
  });
}
