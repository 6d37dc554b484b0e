-- The machines that claimed each run (src/db/schema.ts, run_machines): the runs list's filter by
-- machine finds every run a machine took in any attempt, not only those whose latest attempt it
-- claimed. WITHOUT ROWID (written here by hand; drizzle's schema has no word for it): the primary
-- key is the table's one index, so a new row costs one row written and the runs row's index by
-- machine, which every claim rewrote, goes. Runs claimed before keep their latest machine.
CREATE TABLE `run_machines` (
	`org_id` text NOT NULL,
	`machine_id` text NOT NULL,
	`run_created_at_ms` integer NOT NULL,
	`run_id` text NOT NULL,
	PRIMARY KEY(`org_id`, `machine_id`, `run_created_at_ms`, `run_id`)
) WITHOUT ROWID;
--> statement-breakpoint
INSERT OR IGNORE INTO `run_machines` (`org_id`, `machine_id`, `run_created_at_ms`, `run_id`)
  SELECT `org_id`, `machine_id`, `created_at_ms`, `id` FROM `runs` WHERE `machine_id` IS NOT NULL;
--> statement-breakpoint
DROP INDEX `runs_list_machine`;
