CREATE TABLE `events` (
	`run_id` text NOT NULL,
	`seq` integer NOT NULL,
	`org_id` text NOT NULL,
	`type` text NOT NULL,
	`data` text NOT NULL,
	`at_ms` integer NOT NULL,
	`received_at_ms` integer NOT NULL,
	PRIMARY KEY(`run_id`, `seq`)
);
--> statement-breakpoint
CREATE TABLE `idempotency_keys` (
	`org_id` text NOT NULL,
	`key` text NOT NULL,
	`payload_hash` text NOT NULL,
	`run_id` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	PRIMARY KEY(`org_id`, `key`)
);
--> statement-breakpoint
CREATE TABLE `label_sets` (
	`org_id` text NOT NULL,
	`labels_key` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	PRIMARY KEY(`org_id`, `labels_key`)
);
--> statement-breakpoint
CREATE TABLE `machines` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`name` text NOT NULL,
	`labels` text NOT NULL,
	`protocols` text NOT NULL,
	`cli_version` text NOT NULL,
	`registered_at_ms` integer NOT NULL,
	`last_seen_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `machines_org` ON `machines` (`org_id`,`registered_at_ms`);--> statement-breakpoint
CREATE TABLE `orgs` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`callback_secret` text NOT NULL,
	`created_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `runs` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`state` text NOT NULL,
	`attempt` integer NOT NULL,
	`version` integer NOT NULL,
	`labels_key` text NOT NULL,
	`protocol` text NOT NULL,
	`order_group` integer NOT NULL,
	`order_priority` integer NOT NULL,
	`queued_at_ms` integer NOT NULL,
	`not_before_ms` integer NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `runs_queue` ON `runs` (`org_id`,`labels_key`,`state`,`order_group`,`order_priority`,`queued_at_ms`,`id`);--> statement-breakpoint
CREATE INDEX `runs_list` ON `runs` (`org_id`,`created_at_ms`,`id`);--> statement-breakpoint
CREATE INDEX `runs_list_state` ON `runs` (`org_id`,`state`,`created_at_ms`,`id`);--> statement-breakpoint
CREATE TABLE `sweep` (
	`id` integer PRIMARY KEY NOT NULL,
	`last_tick_at_ms` integer NOT NULL,
	`recovered_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`kind` text NOT NULL,
	`role` text,
	`name` text,
	`token_hash` text NOT NULL,
	`machine_id` text,
	`created_at_ms` integer NOT NULL,
	`revoked_at_ms` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_hash` ON `tokens` (`token_hash`);