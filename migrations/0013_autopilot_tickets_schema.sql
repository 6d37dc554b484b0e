-- The autopilot admission tables of 0007_autopilot_tickets.sql, written by hand then, as the drizzle
-- schema now states them (src/db/autopilot-schema.ts), so drizzle-kit's snapshot knows them too. Every
-- database that took 0007 has them already: IF NOT EXISTS makes this a no-op there.
CREATE TABLE IF NOT EXISTS `autopilot_reconcile` (
	`project_id` text PRIMARY KEY NOT NULL,
	`phase` text NOT NULL,
	`cursor` text,
	`updated_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS `autopilot_tickets` (
	`project_id` text NOT NULL,
	`ticket_key` text NOT NULL,
	`org_id` text NOT NULL,
	`number` integer NOT NULL,
	`status` text NOT NULL,
	`reasons` text NOT NULL,
	`generation` text,
	`run_id` text,
	`updated_at_ms` integer NOT NULL,
	PRIMARY KEY(`project_id`, `ticket_key`)
);
--> statement-breakpoint
CREATE INDEX IF NOT EXISTS `autopilot_tickets_run` ON `autopilot_tickets` (`project_id`,`run_id`);