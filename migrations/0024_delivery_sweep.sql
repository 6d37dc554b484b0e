-- The cron's delivery sweep reads the pending tracker deliveries and completion callbacks of every
-- organization (overdueReceipts in src/queue/delivery.ts): by status, not a scan of every receipt.
CREATE INDEX `callback_deliveries_status` ON `callback_deliveries` (`status`);--> statement-breakpoint
CREATE INDEX `tracker_deliveries_status` ON `tracker_deliveries` (`status`);