-- A recovery's failed tries of one run (src/recovery.ts, RECOVERY_RUN_TRIES_MAX): at the bound the pass
-- records the problem on the run and moves on instead of stopping at it.
CREATE TABLE `recovery_tries` (
	`recovered_at_ms` integer NOT NULL,
	`run_id` text NOT NULL,
	`tries` integer NOT NULL,
	PRIMARY KEY(`recovered_at_ms`, `run_id`)
);
