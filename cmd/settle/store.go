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

// openStore opens the store over its own small pool, with the settling
// path's idle-in-transaction timeout, for commands that write; close()
// ends it.
func (f storeFlags) openStore(a *app) (*settle.Store, func(), error) {
	return f.open(a, true)
}

// openReadStore opens the store for a command that only reads: over a pool
// no idle-in-transaction timeout ends (databaseFlags.openPool).
func (f storeFlags) openReadStore(a *app) (*settle.Store, func(), error) {
	return f.open(a, false)
}

func (f storeFlags) open(a *app, settling bool) (*settle.Store, func(), error) {
	f.PoolMaxConns = min(f.PoolMaxConns, 4)
	pool, err := f.openPool(a.ctx, settling)
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

// openReadStore opens the store over its own small pool, one no
// idle-in-transaction timeout ends (storeFlags.openReadStore); close() ends
// it. Read-only commands have no other way to open it.
func (f readFlags) openReadStore(a *app) (*settle.Store, func(), error) {
	return storeFlags{databaseFlags: f.databaseFlags}.openReadStore(a)
}
