#!/bin/sh
# Creates the service's login role as a member of settle_app, the role the
# migrations grant append-only rights to (created here first so the grant
# can be made before the schema exists; the migration keeps it as is).
set -eu
psql -v ON_ERROR_STOP=1 -U postgres -d settle <<SQL
CREATE ROLE settle_app NOLOGIN;
CREATE ROLE settle_service LOGIN PASSWORD '${SETTLE_SERVICE_PASSWORD}' IN ROLE settle_app;
SQL
