package main

// migrateCmd applies the schema. It needs the owner's credentials, which
// the service itself should not have.
type migrateCmd struct {
	OwnerURL string `name:"owner-url" env:"SETTLE_OWNER_URL,DATABASE_URL" required:"" help:"PostgreSQL URL of the schema owner."`
}

// Run applies the missing migrations.
func (c *migrateCmd) Run(a *app) error {
	return migrate(a.ctx, a, c.OwnerURL)
}
