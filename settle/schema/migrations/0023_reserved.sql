-- settle schema, version 23: holds the number of a migration made beside
-- this one; it changes nothing.
SELECT 1;
