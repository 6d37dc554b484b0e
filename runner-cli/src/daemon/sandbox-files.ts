// The files the daemon shares with the runner and the agent inside the sandbox: its own state
// files (launch.json, status.json, final.json), which the runner reads, and the agent's JSON files
// (the result and the checkpoint), which the daemon reads as data.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { errorText } from '../api.js';

export function writeState(dir: string | undefined, name: string, data: any) {
  if (!dir) return;
  try {
    const path = join(dir, name);
    writeFileSync(`${path}.tmp`, JSON.stringify(data) + '\n');
    renameSync(`${path}.tmp`, path);
  } catch {
    // the state dir is a courtesy to the runner; reports are what counts
  }
}

/** A JSON object the agent wrote: the object, or that the file is missing, or why it is not a JSON object. */
export function readAgentJsonObject(path: string): { object: Record<string, any> } | { missing: true } | { broken: string } {
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return { missing: true };
  }
  try {
    const object = JSON.parse(text);
    if (!object || typeof object !== 'object' || Array.isArray(object)) throw new Error('not an object');
    return { object };
  } catch (e) {
    return { broken: errorText(e) };
  }
}
