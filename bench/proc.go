package bench

import (
	"bytes"
	"os"
	"runtime/debug"
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

// hostCPU returns the host's CPU time that was idle (idle and iowait) and
// all of it, over every core, in clock ticks since boot (/proc/stat's
// first line); zeros where it cannot be read.
func hostCPU() (idle, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	// user nice system idle iowait irq softirq steal (guest time is in user).
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total
}

// resetPeakRSS returns the memory the bench no longer uses to the OS and
// starts the peak resident set size of this process again from what is
// left (Linux clear_refs 5), so a run's peak excludes what the bench held
// before it (the pre-loaded workload, the producer's buffers, the runs
// before). It reports whether the kernel allowed it.
func resetPeakRSS() bool {
	debug.FreeOSMemory()
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
