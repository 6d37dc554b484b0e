CREATE TABLE `artifact_chunks` (
	`attempt` integer NOT NULL,
	`idx` integer NOT NULL,
	`data` text NOT NULL,
	PRIMARY KEY(`attempt`, `idx`)
);
--> statement-breakpoint
CREATE TABLE `attempt_tokens` (
	`attempt` integer PRIMARY KEY NOT NULL,
	`machine_id` text NOT NULL,
	`token_hash` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `attempt_tokens_token_hash_unique` ON `attempt_tokens` (`token_hash`);--> statement-breakpoint
CREATE TABLE `checkpoint_chunks` (
	`part` text NOT NULL,
	`idx` integer NOT NULL,
	`data` text NOT NULL,
	PRIMARY KEY(`part`, `idx`)
);
--> statement-breakpoint
CREATE TABLE `outbox` (
	`seq` integer PRIMARY KEY NOT NULL,
	`type` text NOT NULL,
	`data` text NOT NULL,
	`at_ms` integer NOT NULL,
	`sent_at_ms` integer,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at_ms` integer NOT NULL,
	`last_error` text,
	`unconfirmed` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE `run` (
	`id` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`attempt` integer NOT NULL,
	`version` integer NOT NULL,
	`doc` text NOT NULL,
	`projected_version` integer DEFAULT 0 NOT NULL,
	`slot_released_attempt` integer DEFAULT 0 NOT NULL
);
