CREATE TABLE `ended_runs` (
	`run_id` text PRIMARY KEY NOT NULL,
	`ended_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `ended_runs_age` ON `ended_runs` (`ended_at_ms`,`run_id`);--> statement-breakpoint
CREATE INDEX `idempotency_keys_age` ON `idempotency_keys` (`created_at_ms`);--> statement-breakpoint
-- Runs that ended before this migration: their events are pruned like any other ended run's.
INSERT OR IGNORE INTO `ended_runs` (`run_id`, `ended_at_ms`) SELECT `id`, `updated_at_ms` FROM `runs` WHERE `state` IN ('completed', 'failed', 'cancelled');
