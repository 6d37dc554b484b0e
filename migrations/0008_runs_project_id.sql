-- The autopilot project of an admitted run (the scheduler skips runs of a project whose gates are closed).
ALTER TABLE `runs` ADD `project_id` text;
