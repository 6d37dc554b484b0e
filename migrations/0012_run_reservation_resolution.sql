ALTER TABLE `run_reservations` ADD `charged_cents` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `run_reservations` ADD `resolution_note` text;--> statement-breakpoint
ALTER TABLE `run_reservations` ADD `resolved_by` text;--> statement-breakpoint
ALTER TABLE `run_reservations` ADD `resolved_at_ms` integer;