package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// selfCPU is the user+system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS starts the peak resident set size of this process again
// from its current size (Linux clear_refs 5), so a run's peak excludes
// what the bench itself held before it (the pre-loaded workload, the
// producer's buffers). It reports whether the kernel allowed it.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is this process's peak resident set size in bytes (VmHWM), and
// rss its current one (VmRSS).
func peakRSS() int64 { return statusKB("VmHWM:") * 1024 }
func rss() int64     { return statusKB("VmRSS:") * 1024 }

func statusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line[len(field):])
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
