// drizzle-kit's view of the SchedulerObject's SQLite (durable-objects/scheduler-schema.ts).
import { storeConfig } from "./durable-objects/drizzle/store-config";

export default storeConfig("scheduler");
