/**
 * Sets `key` in a Map kept to at most `max` entries: a new key past the bound pushes out the oldest
 * one (a Map keeps its keys in insertion order).
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  if (!map.has(key) && map.size >= max) map.delete(map.keys().next().value!);
  map.set(key, value);
}
