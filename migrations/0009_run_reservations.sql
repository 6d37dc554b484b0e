CREATE TABLE `run_reservations` (
	`org_id` text NOT NULL,
	`run_id` text NOT NULL,
	`project_id` text NOT NULL,
	`status` text NOT NULL,
	`reserved_cents` integer NOT NULL,
	`cost_cents` integer,
	`settled_cents` integer NOT NULL,
	`released_cents` integer NOT NULL,
	`last_op_id` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL,
	PRIMARY KEY(`org_id`, `run_id`),
	CONSTRAINT "run_reservations_money" CHECK("run_reservations"."reserved_cents" >= 0 AND "run_reservations"."settled_cents" >= 0 AND "run_reservations"."released_cents" >= 0 AND "run_reservations"."settled_cents" + "run_reservations"."released_cents" <= "run_reservations"."reserved_cents")
);
--> statement-breakpoint
CREATE INDEX `run_reservations_project` ON `run_reservations` (`org_id`,`project_id`,`status`);--> statement-breakpoint
ALTER TABLE `ledger_entries` ADD `run_id` text;--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_run_kind` ON `ledger_entries` (`org_id`,`run_id`,`kind`) WHERE "ledger_entries"."run_id" IS NOT NULL;