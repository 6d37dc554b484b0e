-- Tracker deliveries (docs/protocol.md, "Tracker deliveries"): one receipt per run and kind.
CREATE TABLE `tracker_deliveries` (
	`run_id` text NOT NULL,
	`kind` text NOT NULL,
	`org_id` text NOT NULL,
	`project_id` text NOT NULL,
	`ticket_key` text NOT NULL,
	`request` text NOT NULL,
	`status` text NOT NULL,
	`tries` integer NOT NULL,
	`last_error` text,
	`receipt` text,
	`created_at_ms` integer NOT NULL,
	`last_try_at_ms` integer,
	`delivered_at_ms` integer,
	PRIMARY KEY(`run_id`, `kind`)
);
--> statement-breakpoint
CREATE INDEX `tracker_deliveries_org_status` ON `tracker_deliveries` (`org_id`,`status`);