-- The floor's queue: Docket's queue columns and its queue index (migrations/0000_init.sql, runs_queue).
CREATE TABLE `queue` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`labels_key` text NOT NULL,
	`state` text NOT NULL,
	`order_group` integer NOT NULL,
	`order_priority` integer NOT NULL,
	`queued_at_ms` integer NOT NULL,
	`machine_id` text
);
--> statement-breakpoint
CREATE INDEX `queue_head` ON `queue` (`org_id`,`labels_key`,`state`,`order_group`,`order_priority`,`queued_at_ms`,`id`);
