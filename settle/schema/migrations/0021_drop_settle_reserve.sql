-- settle schema, version 21: settle_reserve is gone.
--
-- Version 16 made settle_reserve (n ids of a block-stepped sequence, as an
-- array) for the identities' and the outbox's inserts; those statements
-- have since taken their ids another way and nothing calls it. A function
-- nobody calls is still one the application role may execute: it goes.
DROP FUNCTION settle_reserve(regclass, integer);
