CREATE TABLE `autopilot_projects` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`name` text NOT NULL,
	`provider` text NOT NULL,
	`repository` text NOT NULL,
	`repository_key` text NOT NULL,
	`ready_label` text NOT NULL,
	`review_label` text NOT NULL,
	`brief_heading` text NOT NULL,
	`done_states` text NOT NULL,
	`done_labels` text NOT NULL,
	`queue_capacity` integer NOT NULL,
	`automation_accounts` text NOT NULL,
	`trusted_actor_assumption` integer NOT NULL,
	`github_api_url` text NOT NULL,
	`app_id` text NOT NULL,
	`installation_id` text NOT NULL,
	`run` text NOT NULL,
	`webhook_secret_enc` text NOT NULL,
	`private_key_enc` text NOT NULL,
	`created_by` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `autopilot_projects_org` ON `autopilot_projects` (`org_id`,`created_at_ms`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `autopilot_projects_repository` ON `autopilot_projects` (`org_id`,`provider`,`repository_key`);