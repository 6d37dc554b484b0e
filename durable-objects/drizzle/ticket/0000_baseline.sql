CREATE TABLE `carried_over` (
	`id` integer PRIMARY KEY NOT NULL,
	`at_ms` integer NOT NULL,
	`run_id` text,
	CONSTRAINT "carried_over_one_row" CHECK("carried_over"."id" = 1)
);
--> statement-breakpoint
CREATE TABLE `deliveries` (
	`delivery_id` text PRIMARY KEY NOT NULL,
	`seen_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `history` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`entry` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `ticket` (
	`id` integer PRIMARY KEY NOT NULL,
	`ticket_key` text NOT NULL,
	`project_id` text NOT NULL,
	`org_id` text NOT NULL,
	`number` integer NOT NULL,
	`status` text NOT NULL,
	`reasons` text NOT NULL,
	`generation` text,
	`admitted_generation` text,
	`pending_generation` text,
	`run_id` text,
	`updated_at_ms` integer NOT NULL,
	`withdraw_run_id` text,
	`withdraw_reason` text,
	`withdraw_attempts` integer DEFAULT 0 NOT NULL,
	CONSTRAINT "ticket_one_row" CHECK("ticket"."id" = 1)
);
