#!/usr/bin/env bash
# The service's CPU in an end-to-end run, by part: each sample of a CPU
# profile goes to the first part its stack names (a lane's load, decide,
# write, commit, decode or result publishing; the Kafka client's own
# goroutines; the relay; the collector; the scheduler), leaving out the
# bench's own work (making the load, reading it back, checking it), which
# runs under the profiler label bench=... From the repository's root:
#
#   bin/settle bench --only e2e --records 300000 --cpuprofile /tmp/b/cpu.pprof --out /tmp/b
#   docs/experiments/service-cpu-by-part.bash bin/settle /tmp/b/cpu.pprof
set -euo pipefail
bin=$1 profile=$2
go tool pprof -traces -tagignore='bench=.+' "$bin" "$profile" 2>/dev/null | awk '
/^-----------/ {
	if (w != "") {
		c = "other"
		if (s ~ /handleLane/) {
			c = "lane, other"
			if (s ~ /state.\(\*State\).Load/) c = "lane: load"
			else if (s ~ /txState\).handle/) c = "lane: decide"
			else if (s ~ /State\).Write|writeIdentities|writeEntries|CopyFrom/) c = "lane: write"
			else if (s ~ /Store\).commit/) c = "lane: commit"
			else if (s ~ /Decode/) c = "lane: decode"
			else if (s ~ /publishAsync/) c = "lane: publish results"
		} else if (s ~ /kgo|kfake/) c = "Kafka client"
		else if (s ~ /relay/) c = "relay"
		else if (s ~ /gcBgMarkWorker|bgsweep|bgscavenge|gcAssist/) c = "collector"
		else if (s ~ /runtime.mcall|schedule|findRunnable|sysmon/) c = "scheduler"
		t[c] += w; tot += w
	}
	w = ""; s = ""; next
}
/^ *[0-9.]+m?s / { v = $1; if (v ~ /ms$/) { sub(/ms/, "", v); v = v / 1000 } else sub(/s$/, "", v); w = v; s = $0; next }
{ s = s " " $0 }
END {
	for (k in t) printf "%6.2f s %5.1f%%  %s\n", t[k], 100 * t[k] / tot, k
	printf "%6.2f s         total\n", tot
}' | sort -rn
