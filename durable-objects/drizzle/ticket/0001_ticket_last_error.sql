CREATE TABLE `last_error` (
	`id` integer PRIMARY KEY NOT NULL,
	`at_ms` integer NOT NULL,
	`door` text NOT NULL,
	`failure` text NOT NULL,
	`message` text NOT NULL,
	CONSTRAINT "last_error_one_row" CHECK("last_error"."id" = 1)
);
