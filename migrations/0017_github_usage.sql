CREATE TABLE `github_http_cache` (
	`installation_key` text NOT NULL,
	`url` text NOT NULL,
	`etag` text,
	`last_modified` text,
	`link` text,
	`body` text NOT NULL,
	`validated_at_ms` integer NOT NULL,
	PRIMARY KEY(`installation_key`, `url`)
);
--> statement-breakpoint
CREATE INDEX `github_http_cache_age` ON `github_http_cache` (`installation_key`,`validated_at_ms`);--> statement-breakpoint
CREATE TABLE `github_rate_limits` (
	`installation_key` text PRIMARY KEY NOT NULL,
	`remaining` integer NOT NULL,
	`limit_total` integer NOT NULL,
	`reset_at_ms` integer NOT NULL,
	`observed_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `github_request_counts` (
	`installation_key` text NOT NULL,
	`project_id` text NOT NULL,
	`minute_ms` integer NOT NULL,
	`counted` integer NOT NULL,
	PRIMARY KEY(`installation_key`, `project_id`, `minute_ms`)
);
--> statement-breakpoint
CREATE INDEX `github_request_counts_project` ON `github_request_counts` (`project_id`,`minute_ms`);--> statement-breakpoint
ALTER TABLE `autopilot_reconcile` ADD `pass_kind` text DEFAULT 'full' NOT NULL;--> statement-breakpoint
ALTER TABLE `autopilot_reconcile` ADD `pass_started_at_ms` integer;--> statement-breakpoint
ALTER TABLE `autopilot_reconcile` ADD `since_ms` integer;--> statement-breakpoint
ALTER TABLE `autopilot_reconcile` ADD `passes_since_full` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `autopilot_reconcile` ADD `full_pass_finished_at_ms` integer;--> statement-breakpoint
ALTER TABLE `autopilot_reconcile` ADD `paused_reason` text;