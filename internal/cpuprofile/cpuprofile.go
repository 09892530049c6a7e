// Package cpuprofile writes a CPU profile (pprof) of the process to a file:
// `settle run --cpuprofile` (the service) and `settle-bench --cpuprofile`
// (the whole bench). It must hold nothing else.
package cpuprofile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// Start writes a CPU profile (pprof) of the process to path until
// the returned stop is called (deferred: defer stop(&err)); stop sets *errp,
// if it holds no error yet, when the profile was not written whole. An
// empty path profiles nothing.
func Start(path string) (stop func(errp *error), err error) {
	if path == "" {
		return func(*error) {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func(errp *error) {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil && *errp == nil {
			*errp = fmt.Errorf("cpu profile %s: %w", path, err)
		}
	}, nil
}
