ALTER TABLE `machines` ADD `deregistered_at_ms` integer;--> statement-breakpoint
ALTER TABLE `orgs` ADD `previous_callback_secret` text;--> statement-breakpoint
ALTER TABLE `orgs` ADD `callback_secret_rotated_at_ms` integer;--> statement-breakpoint
ALTER TABLE `tokens` ADD `expires_at_ms` integer;--> statement-breakpoint
ALTER TABLE `tokens` ADD `max_uses` integer;--> statement-breakpoint
ALTER TABLE `tokens` ADD `uses` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `tokens_org` ON `tokens` (`org_id`,`created_at_ms`,`id`);--> statement-breakpoint
UPDATE `tokens` SET `expires_at_ms` = `created_at_ms` + 604800000 WHERE `kind` = 'registration' AND `expires_at_ms` IS NULL;