-- Managed runner pools and their slots (src/db/managed-schema.ts; docs/managed-runners.md).
CREATE TABLE `managed_pools` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`name` text NOT NULL,
	`labels` text NOT NULL,
	`min_instances` integer NOT NULL,
	`max_instances` integer NOT NULL,
	`idle_ms` integer,
	`state` text NOT NULL,
	`created_by` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL,
	`scaled_at_ms` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `managed_pools_name` ON `managed_pools` (`org_id`,`name`);--> statement-breakpoint
CREATE INDEX `managed_pools_org` ON `managed_pools` (`org_id`,`created_at_ms`,`id`);--> statement-breakpoint
CREATE INDEX `managed_pools_scaled` ON `managed_pools` (`state`,`scaled_at_ms`);--> statement-breakpoint
CREATE TABLE `managed_slots` (
	`pool_id` text NOT NULL,
	`slot` integer NOT NULL,
	`org_id` text NOT NULL,
	`instance_name` text NOT NULL,
	`runner_name` text NOT NULL,
	`token_id` text NOT NULL,
	`machine_id` text,
	`started_at_ms` integer NOT NULL,
	`busy_at_ms` integer NOT NULL,
	PRIMARY KEY(`pool_id`, `slot`)
);
--> statement-breakpoint
CREATE INDEX `managed_slots_org` ON `managed_slots` (`org_id`);