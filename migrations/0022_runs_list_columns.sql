-- The runs list's columns and filters (src/db/schema.ts, runs; docs/protocol.md, "Runs"): rows written
-- before them keep nulls until the run next changes.
ALTER TABLE `runs` ADD `title` text;--> statement-breakpoint
ALTER TABLE `runs` ADD `repository_url` text;--> statement-breakpoint
ALTER TABLE `runs` ADD `machine_id` text;--> statement-breakpoint
ALTER TABLE `runs` ADD `started_at_ms` integer;--> statement-breakpoint
ALTER TABLE `runs` ADD `ended_at_ms` integer;--> statement-breakpoint
CREATE INDEX `runs_list_project` ON `runs` (`org_id`,`project_id`,`created_at_ms`,`id`);--> statement-breakpoint
CREATE INDEX `runs_list_machine` ON `runs` (`org_id`,`machine_id`,`created_at_ms`,`id`);