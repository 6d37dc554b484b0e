// D1 binds at most 100 values a statement: a read of rows by a list of keys (`IN (…)`) goes in
// batches small enough to leave room for the statement's other values.

const KEYS_PER_READ = 90;

/** Every row `read` finds for `keys`, read KEYS_PER_READ keys at a time, in order. */
export async function readInBatches<K, R>(keys: K[], read: (batch: K[]) => Promise<R[]>): Promise<R[]> {
  const rows: R[] = [];
  for (let i = 0; i < keys.length; i += KEYS_PER_READ) rows.push(...(await read(keys.slice(i, i + KEYS_PER_READ))));
  return rows;
}
