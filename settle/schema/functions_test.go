package schema_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/settletest"
)

// TestEveryFunctionHasACaller: every function the migrations leave in a
// database is called by something: a trigger, another function, or a
// statement of the module (a .sql file beside its package, or Go source
// outside tests and migrations). A function left behind when its callers
// moved on is one more thing the application role may execute and a
// reader must understand. Seen failing with settle_reserve (migration 16),
// whose callers took their ids another way.
func TestEveryFunctionHasACaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, settletest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT p.proname,
		       EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgfoid = p.oid)
		           OR EXISTS (SELECT 1 FROM pg_proc o WHERE o.oid <> p.oid AND o.pronamespace = p.pronamespace
		                          AND o.prosrc ~ ('\m' || p.proname || '\M'))
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = current_schema() AND p.prokind = 'f'`)
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	for rows.Next() {
		var name string
		var byDatabase bool
		if err := rows.Scan(&name, &byDatabase); err != nil {
			t.Fatal(err)
		}
		called[name] = called[name] || byDatabase
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(called) == 0 {
		t.Fatal("no functions in the migrated database: the query is broken")
	}
	// The module's own statements: every .sql and non-test .go file but
	// the migrations, which define the functions.
	root := filepath.Join("..", "..")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && (d.Name() == "migrations" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case d.IsDir() || strings.HasSuffix(path, "_test.go") || !(strings.HasSuffix(path, ".sql") || strings.HasSuffix(path, ".go")):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for name := range called {
			if !called[name] && strings.Contains(string(b), name+"(") {
				called[name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range called {
		if !ok {
			t.Errorf("function %s: no trigger, function or statement of the module calls it; drop it in a new migration", name)
		}
	}
}
