// Lane 4 of the model-based tests of the run objects (model-harness.ts).
import { modelLane } from "./model-harness";

modelLane(4);
