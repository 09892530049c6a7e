package main

import (
	"encoding/json"

	"github.com/settlehq/settle/settle"
)

// storeFlags are what the read-side and analyst commands need: the
// database, and the topic names the store writes to its outbox.
type storeFlags struct {
	databaseFlags `embed:""`
	topicFlags    `embed:""`
}

// openStore opens the store over its own small pool; close() ends it.
func (f storeFlags) openStore(a *app) (*settle.Store, func(), error) {
	f.PoolMaxConns = min(f.PoolMaxConns, 4)
	pool, err := f.pool(a.ctx)
	if err != nil {
		return nil, nil, err
	}
	store, err := settle.Open(a.ctx, pool, settleFlags{}.config(f.topicFlags))
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

// readFlags are what the read-only commands need: the database alone. They
// write to no topic, so they take no topic flags; the store they open has
// settle's default topic names, which nothing of theirs uses.
type readFlags struct {
	databaseFlags `embed:""`
}

// openStore opens the store over its own small pool; close() ends it.
func (f readFlags) openStore(a *app) (*settle.Store, func(), error) {
	return storeFlags{databaseFlags: f.databaseFlags}.openStore(a)
}
