-- A pool remembers its last halted container, for the console (src/db/managed-schema.ts; docs/managed-runners.md).
ALTER TABLE `managed_pools` ADD `last_halt` text;