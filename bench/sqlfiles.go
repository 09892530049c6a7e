package bench

import (
	"embed"
	"errors"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// mustSQL loads one embedded statement; the set is fixed at build time, so a
// missing file is a build defect.
func mustSQL(name string) string {
	b, err := sqlFiles.ReadFile("sql/" + name)
	if err != nil {
		panic(errors.New("bench: missing embedded statement " + name))
	}
	return string(b)
}
