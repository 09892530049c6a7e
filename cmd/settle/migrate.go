package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/schema"
)

// migrateCmd applies the schema. It needs the owner's credentials, which
// the service itself should not have.
type migrateCmd struct {
	OwnerURL       string `name:"owner-url" env:"SETTLE_OWNER_URL,DATABASE_URL" required:"" help:"PostgreSQL URL of the schema owner."`
	HashPartitions int    `name:"hash-partitions" help:"New, empty database only: partition every per-tenant table by hash of tenant_id into N partitions (docs/operations.md)."`
}

// Run applies the missing migrations, then partitions a new database's
// per-tenant tables if asked.
func (c *migrateCmd) Run(a *app) error {
	if c.HashPartitions < 0 || c.HashPartitions > schema.PartitionsMax {
		return usageError{fmt.Sprintf("--hash-partitions %d: give 1 to %d (0 = plain tables)", c.HashPartitions, schema.PartitionsMax)}
	}
	if err := migrate(a.ctx, a, c.OwnerURL); err != nil || c.HashPartitions == 0 {
		return err
	}
	conn, err := pgx.Connect(a.ctx, c.OwnerURL)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL at %s with the owner URL: %w", redact(c.OwnerURL), err)
	}
	defer conn.Close(context.WithoutCancel(a.ctx))
	if err := schema.Partition(a.ctx, conn, c.HashPartitions); err != nil {
		return err
	}
	n, err := schema.Partitions(a.ctx, conn)
	if err != nil {
		return err
	}
	a.log.Info("per-tenant tables partitioned by hash of tenant_id", "partitions", n, "tables", len(schema.TenantTables))
	return nil
}
