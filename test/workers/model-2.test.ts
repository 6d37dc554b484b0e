// Lane 2 of the model-based tests of the run objects (model-harness.ts).
import { modelLane } from "./model-harness";

modelLane(2);
