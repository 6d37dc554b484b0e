-- The ticket list shows each ticket's latest decision (kind, door, actor) and its last error without reading
-- each TicketObject (durable-objects/ticket-index.ts; docs/protocol.md, "Autopilot admission").
ALTER TABLE `autopilot_tickets` ADD `decision` text;--> statement-breakpoint
ALTER TABLE `autopilot_tickets` ADD `last_error` text;