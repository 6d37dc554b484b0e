CREATE TABLE `budget_holds` (
	`run_id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`reserved_cents` integer NOT NULL,
	`status` text NOT NULL,
	`cost_cents` integer,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `budget_holds_project` ON `budget_holds` (`project_id`,`status`);--> statement-breakpoint
CREATE TABLE `project_gates` (
	`project_id` text PRIMARY KEY NOT NULL,
	`enabled` integer NOT NULL,
	`draining` integer NOT NULL,
	`dispatch_window` text,
	`concurrency` integer,
	`budget_limit_cents` integer,
	`budget_per_run_cents` integer,
	`budget_spent_cents` integer DEFAULT 0 NOT NULL,
	`budget_reset_at_ms` integer,
	`updated_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `slots` (
	`run_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`project_id` text NOT NULL,
	`org_id` text NOT NULL,
	`taken_at_ms` integer NOT NULL,
	`checked_at_ms` integer NOT NULL,
	PRIMARY KEY(`run_id`, `attempt`)
);
--> statement-breakpoint
CREATE INDEX `slots_project` ON `slots` (`project_id`,`taken_at_ms`);--> statement-breakpoint
CREATE INDEX `slots_checked` ON `slots` (`checked_at_ms`);