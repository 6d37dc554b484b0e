// A long model-based run: MODEL_RUNS sequences in all (default 20,000), in rounds of MODEL_ROUND
// (default 1,000), each round one `vitest run` of the model lanes with its own seed. Rounds, not
// one huge run: a test file can make only a few hundred new run objects before the test pool slows
// down (cloudflare/workers-sdk#15092; test/workers/model-harness.ts).
//
//   MODEL_RUNS=20000 node scripts/model-soak.mjs            # a random first seed, printed
//   MODEL_RUNS=20000 MODEL_SEED=42 node scripts/model-soak.mjs
//
// A failing round prints the MODEL_SEED and MODEL_RUNS that replay it.

import { spawnSync } from "node:child_process";
import { helpOrRefuse, openingComment } from "./cli-args.mjs";

helpOrRefuse("node scripts/model-soak.mjs", () => openingComment(import.meta.url));

const total = Number(process.env.MODEL_RUNS || 20_000);
const perRound = Number(process.env.MODEL_ROUND || 1_000);
const firstSeed = Number(process.env.MODEL_SEED || Math.floor(Math.random() * 2 ** 30));
const rounds = Math.ceil(total / perRound);

for (let round = 0; round < rounds; round++) {
  // Lane seeds are the round's seed plus the lane number: rounds stay apart.
  const seed = firstSeed + round * 100;
  const runs = Math.min(perRound, total - round * perRound);
  console.log(`model soak: round ${round + 1} of ${rounds}, ${runs} sequences, MODEL_SEED=${seed}`);
  const result = spawnSync("npx", ["vitest", "run", "--project", "workers", "test/workers/model-"], {
    stdio: "inherit",
    env: { ...process.env, MODEL_RUNS: String(runs), MODEL_SEED: String(seed) },
  });
  if (result.status !== 0) {
    console.error(`model soak: round ${round + 1} failed; replay it with MODEL_SEED=${seed} MODEL_RUNS=${runs} npx vitest run --project workers test/workers/model-`);
    process.exit(result.status ?? 1);
  }
}
console.log(`model soak: ${total} sequences in ${rounds} rounds, every invariant kept (first seed ${firstSeed})`);
