// The agent's output as it streams: split into lines, echoed to the sandbox log, and relayed into
// the report buffer, where `::phase <name>` lines set the phase.
import type { Daemon } from './attempt.js';
import { writeState } from './sandbox-files.js';

export const PHASES = ['planning', 'implementing', 'verifying'];
/** `::phase implementing` on its own line (stdout or stderr) sets the phase. */
export const PHASE_LINE = /^::phase\s+(\S+)\s*$/;

/** `::phase <name>` sets the phase; any other line is output to report. */
export function relayLine(d: Daemon, line: string) {
  const m = PHASE_LINE.exec(line);
  if (m && PHASES.includes(m[1])) {
    d.buffer.setPhase(m[1]);
    writeState(d.stateDir, 'status.json', { phase: m[1], at_ms: Date.now() });
    return;
  }
  d.buffer.push(line);
}

/**
 * Split a stream into lines, passing the text through to `echo`.
 */
export function pipeLines(stream: NodeJS.ReadableStream | null, onLine: (line: string) => void, echo: (chunk: string) => void) {
  return new Promise((resolve) => {
    if (!stream) return resolve(undefined);
    let rest = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      echo(chunk);
      rest += chunk;
      let i;
      while ((i = rest.indexOf('\n')) >= 0) {
        onLine(rest.slice(0, i).replace(/\r$/, ''));
        rest = rest.slice(i + 1);
      }
      if (rest.length > 64 * 1024) {
        onLine(rest);
        rest = '';
      }
    });
    stream.on('end', () => {
      if (rest) onLine(rest);
      resolve(undefined);
    });
    stream.on('error', () => resolve(undefined));
  });
}
