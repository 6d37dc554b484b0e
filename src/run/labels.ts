// Queue rows are keyed by the canonical set of what a run requires of a machine: its launch
// protocol and its labels (../shared/DESIGN.md, "Claims are serialized per organization").

export function normalizeLabels(labels: readonly string[]): string[] {
  return [...new Set(labels.map((l) => l.trim()).filter(Boolean))].sort();
}

export function labelsKey(protocol: string, labels: readonly string[]): string {
  return `${protocol}|${normalizeLabels(labels).join(",")}`;
}

export function parseLabelsKey(key: string): { protocol: string; labels: string[] } {
  const [protocol, rest = ""] = key.split("|", 2);
  return { protocol, labels: rest ? rest.split(",") : [] };
}

/** True when a machine with these labels and protocols can serve runs of this key. */
export function covers(key: string, machineLabels: readonly string[], protocols: readonly string[]): boolean {
  const need = parseLabelsKey(key);
  if (!protocols.includes(need.protocol)) return false;
  return need.labels.every((l) => machineLabels.includes(l));
}
