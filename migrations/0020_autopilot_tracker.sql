ALTER TABLE `autopilot_projects` ADD `tracker` text DEFAULT '{"kind":"github"}' NOT NULL;--> statement-breakpoint
ALTER TABLE `autopilot_projects` ADD `tracker_token_enc` text DEFAULT '' NOT NULL;