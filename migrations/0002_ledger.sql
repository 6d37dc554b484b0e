CREATE TABLE `build_jobs` (
	`org_id` text NOT NULL,
	`id` text NOT NULL,
	`request_id` text NOT NULL,
	`project_id` text NOT NULL,
	`status` text NOT NULL,
	`outcome` text,
	`review_reason` text,
	`request_hash` text NOT NULL,
	`source_url` text NOT NULL,
	`pinned_commit` text NOT NULL,
	`migration_plan` text NOT NULL,
	`chain_target` text NOT NULL,
	`launch` text NOT NULL,
	`labels` text NOT NULL,
	`callback_url` text NOT NULL,
	`callback_token` text NOT NULL,
	`run_id` text,
	`reserved_cents` integer NOT NULL,
	`cost_cents` integer,
	`settled_cents` integer NOT NULL,
	`released_cents` integer NOT NULL,
	`charged_cents` integer NOT NULL,
	`artifact_exists` integer NOT NULL,
	`artifact_empty` integer,
	`last_op_id` text NOT NULL,
	`dispatch_attempts` integer NOT NULL,
	`dispatch_attempted_at_ms` integer NOT NULL,
	`dispatch_confirmed_at_ms` integer,
	`dispatch_error` text,
	`resolution_note` text,
	`resolved_by` text,
	`resolved_at_ms` integer,
	`created_by` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL,
	`ended_at_ms` integer,
	PRIMARY KEY(`org_id`, `id`),
	CONSTRAINT "build_jobs_money" CHECK("build_jobs"."reserved_cents" >= 0 AND "build_jobs"."settled_cents" >= 0 AND "build_jobs"."released_cents" >= 0 AND "build_jobs"."charged_cents" >= 0 AND "build_jobs"."settled_cents" + "build_jobs"."released_cents" <= "build_jobs"."reserved_cents")
);
--> statement-breakpoint
CREATE UNIQUE INDEX `build_jobs_one_held_per_request` ON `build_jobs` (`org_id`,`request_id`) WHERE "build_jobs"."status" IN ('dispatch_unconfirmed','queued','cost_review','reconcile');--> statement-breakpoint
CREATE UNIQUE INDEX `build_jobs_callback_token` ON `build_jobs` (`callback_token`);--> statement-breakpoint
CREATE INDEX `build_jobs_org_status` ON `build_jobs` (`org_id`,`status`,`created_at_ms`);--> statement-breakpoint
CREATE INDEX `build_jobs_request` ON `build_jobs` (`org_id`,`request_id`,`created_at_ms`);--> statement-breakpoint
CREATE INDEX `build_jobs_run` ON `build_jobs` (`run_id`);--> statement-breakpoint
CREATE INDEX `build_jobs_status` ON `build_jobs` (`status`,`dispatch_attempted_at_ms`);--> statement-breakpoint
CREATE TABLE `build_requests` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`project_id` text NOT NULL,
	`title` text NOT NULL,
	`label` text NOT NULL,
	`pinned_commit` text,
	`migration_plan` text,
	`chain_target` text,
	`plan_saved_at_ms` integer,
	`plan_saved_by` text,
	`created_by` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `build_requests_org` ON `build_requests` (`org_id`,`created_at_ms`,`id`);--> statement-breakpoint
CREATE INDEX `build_requests_project` ON `build_requests` (`org_id`,`project_id`,`created_at_ms`);--> statement-breakpoint
CREATE TABLE `credit_balances` (
	`org_id` text PRIMARY KEY NOT NULL,
	`granted_cents` integer NOT NULL,
	`held_cents` integer NOT NULL,
	`spent_cents` integer NOT NULL,
	`updated_at_ms` integer NOT NULL,
	CONSTRAINT "credit_balances_identity" CHECK("credit_balances"."held_cents" >= 0 AND "credit_balances"."spent_cents" >= 0 AND "credit_balances"."granted_cents" >= "credit_balances"."held_cents" + "credit_balances"."spent_cents")
);
--> statement-breakpoint
CREATE TABLE `ledger_entries` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`seq` integer NOT NULL,
	`op_id` text NOT NULL,
	`kind` text NOT NULL,
	`amount_cents` integer NOT NULL,
	`job_id` text,
	`request_id` text,
	`actor` text NOT NULL,
	`note` text,
	`external_key` text,
	`created_at_ms` integer NOT NULL,
	CONSTRAINT "ledger_entries_amount" CHECK("ledger_entries"."amount_cents" >= 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_org_seq` ON `ledger_entries` (`org_id`,`seq`);--> statement-breakpoint
CREATE INDEX `ledger_entries_op` ON `ledger_entries` (`op_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_job_kind` ON `ledger_entries` (`org_id`,`job_id`,`kind`) WHERE "ledger_entries"."job_id" IS NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_external_key` ON `ledger_entries` (`org_id`,`external_key`) WHERE "ledger_entries"."external_key" IS NOT NULL;--> statement-breakpoint
CREATE TABLE `projects` (
	`id` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`name` text NOT NULL,
	`source_url` text NOT NULL,
	`launch` text NOT NULL,
	`labels` text NOT NULL,
	`license_name` text,
	`license_accepted_at_ms` integer,
	`license_accepted_by` text,
	`created_by` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `projects_org` ON `projects` (`org_id`,`created_at_ms`,`id`);--> statement-breakpoint
-- The ledger is append-only (../shared/DESIGN.md, "D1 holds the queue and the credit ledger"): no entry is ever changed or removed.
CREATE TRIGGER `ledger_entries_no_update` BEFORE UPDATE ON `ledger_entries` BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;--> statement-breakpoint
CREATE TRIGGER `ledger_entries_no_delete` BEFORE DELETE ON `ledger_entries` BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
