-- A run's reservation may be held again after a claim the run object refused gave it back
-- (src/autopilot/run-budget.ts): reserve and release entries may repeat; settle and charge stay once.
DROP INDEX `ledger_entries_run_kind`;--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_run_end` ON `ledger_entries` (`org_id`,`run_id`,`kind`) WHERE "ledger_entries"."run_id" IS NOT NULL AND "ledger_entries"."kind" IN ('settle', 'charge');