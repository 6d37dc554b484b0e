-- Dashboard sessions (src/db/session-schema.ts): a session id's hash, the member token it acts as, when it
-- began and when it was last seen, so sign-out, revocation and expiry end it on the server.
CREATE TABLE `dashboard_sessions` (
	`id_hash` text PRIMARY KEY NOT NULL,
	`org_id` text NOT NULL,
	`token_id` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`seen_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `dashboard_sessions_token` ON `dashboard_sessions` (`token_id`,`seen_at_ms`);--> statement-breakpoint
CREATE INDEX `dashboard_sessions_seen` ON `dashboard_sessions` (`seen_at_ms`);