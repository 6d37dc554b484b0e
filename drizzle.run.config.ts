// drizzle-kit's view of the RunObject's SQLite (durable-objects/run-schema.ts).
import { storeConfig } from "./durable-objects/drizzle/store-config";

export default storeConfig("run");
