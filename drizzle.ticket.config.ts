// drizzle-kit's view of the TicketObject's SQLite (durable-objects/ticket-schema.ts).
import { storeConfig } from "./durable-objects/drizzle/store-config";

export default storeConfig("ticket");
