#!/usr/bin/env bash
# Whether the host's two cores slow each other down: a CPU-bound loop, and a
# loop reading an array of 2, 16 and 128 MB at random, each run alone and
# then two at once. Equal times mean two cores of their own, not two
# hyperthreads of one or a shared memory path that saturates.
#
#   docs/experiments/two-cores.bash
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/spin.c" <<'C'
#include <stdio.h>
#include <stdint.h>
#include <time.h>
int main(void) {
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	uint64_t x = 1;
	for (uint64_t i = 0; i < 1500000000ULL; i++) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; x ^= x >> 17; }
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("spin: %.3f s (%llu)\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, (unsigned long long)(x & 1));
	return 0;
}
C
cat >"$dir/mem.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
int main(int argc, char **argv) {
	size_t n = (size_t)atoi(argv[1]) * 1024 * 1024 / 8;
	uint64_t *a = malloc(n * 8);
	for (size_t i = 0; i < n; i++) a[i] = i * 2654435761u;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t x = 1, s = 0;
	for (long i = 0; i < 100000000L; i++) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; s += a[(x >> 20) % n]; }
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("random reads of %zu MB: %.3f s (%llu)\n", n * 8 >> 20, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, (unsigned long long)(s & 1));
	return 0;
}
C
gcc -O2 -o "$dir/spin" "$dir/spin.c"
gcc -O2 -o "$dir/mem" "$dir/mem.c"
echo "alone:"; "$dir/spin"
echo "two at once:"; "$dir/spin" & "$dir/spin"; wait
for mb in 2 16 128; do
	echo "alone:"; "$dir/mem" $mb
	echo "two at once:"; "$dir/mem" $mb & "$dir/mem" $mb; wait
done
