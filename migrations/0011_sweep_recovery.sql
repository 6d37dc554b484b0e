ALTER TABLE `sweep` ADD `recovery_done_at_ms` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `sweep` ADD `recovery_cursor` text;--> statement-breakpoint
ALTER TABLE `sweep` ADD `version_id` text;