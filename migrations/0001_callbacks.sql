CREATE TABLE `callback_deliveries` (
	`run_id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`url` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer NOT NULL,
	`last_error` text,
	`last_status_code` integer,
	`last_attempt_at_ms` integer,
	`delivered_at_ms` integer,
	`created_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `callback_deliveries_org` ON `callback_deliveries` (`org_id`,`status`);