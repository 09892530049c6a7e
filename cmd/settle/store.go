package main

import (
	"encoding/json"

	"github.com/settlehq/settle/settle"
)

// openStore connects with the database flags and opens the store, for the
// operator commands. The caller closes the returned pool.
func openStore(a *app, db databaseFlags) (*settle.Store, func(), error) {
	pool, err := db.pool(a.ctx)
	if err != nil {
		return nil, nil, err
	}
	store, err := settle.Open(a.ctx, pool, settle.Config{})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return store, pool.Close, nil
}

// printJSON writes v as indented JSON, for every listing's --json.
func printJSON(a *app, v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
