package service

import (
	"os"
	"runtime/debug"
)

// MemoryLimitMiBDefault is the soft memory limit a settle process runs
// under unless told otherwise (`--memory-limit-mib`).
const MemoryLimitMiBDefault = 384

// TuneGC trades memory for CPU up to a soft limit of limitMiB: below it
// the garbage collector runs 4x less often than Go's default (GOGC=400),
// which saves a fifth of the service's CPU; near it, it collects harder.
// It does nothing for limitMiB <= 0 or when the environment already tunes
// the collector (GOMEMLIMIT or GOGC). It sets the whole process: `settle`
// calls it once at start, and the benchmark too, so that the service it
// runs in-process is measured under the settings it runs with.
func TuneGC(limitMiB int64) {
	if limitMiB <= 0 || os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GOGC") != "" {
		return
	}
	debug.SetMemoryLimit(limitMiB << 20)
	debug.SetGCPercent(400)
}
