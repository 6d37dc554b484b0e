-- Written by hand before D1 migrations were generated, and kept as applied history: D1 applies
-- migrations by file name, so renaming or renumbering it would apply it again. It is not in
-- meta/_journal.json; 0013_autopilot_tickets_schema, which is, restates the same two tables (CREATE
-- TABLE IF NOT EXISTS, a no-op where this one ran), and every snapshot from 0013 on holds them, as
-- src/db/autopilot-schema.ts states them.
--
-- Autopilot admission: each project's index of its tickets (a projection of the TicketObjects,
-- which are the authority), and reconciliation's persisted cursor per project.
CREATE TABLE `autopilot_tickets` (
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
CREATE INDEX `autopilot_tickets_run` ON `autopilot_tickets` (`project_id`, `run_id`);
--> statement-breakpoint
CREATE TABLE `autopilot_reconcile` (
	`project_id` text PRIMARY KEY NOT NULL,
	`phase` text NOT NULL,
	`cursor` text,
	`updated_at_ms` integer NOT NULL
);
