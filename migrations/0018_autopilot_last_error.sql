-- Autopilot projects remember the last time a door could not read the tracker, and why
-- (src/autopilot/last-error.ts; docs/protocol.md, "Autopilot projects").
ALTER TABLE `autopilot_projects` ADD `last_error` text;
