package crashpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestArmParses: SETTLE_CRASH_AT's grammar (name, name@n, name%p, lists)
// is accepted, and an unknown point, @0 or a probability over 1 refused.
func TestArmParses(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"before_commit", true},
		{"before_commit@3", true},
		{"mid_batch%0.5,after_decode@2", true},
		{"nope", false},
		{"before_commit@0", false},
		{"before_commit%2", false},
	} {
		err := Arm(tc.spec)
		if (err == nil) != tc.ok {
			t.Errorf("Arm(%q) = %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
	_ = Arm("")
}

// TestHitKillsOnTheNthHit runs this test binary as a child with a point
// armed for its 3rd hit: the child must die by SIGKILL after exactly two
// hits survived.
func TestHitKillsOnTheNthHit(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		for i := 1; i <= 5; i++ {
			Hit("before_commit")
			if _, err := os.Stdout.WriteString("survived\n"); err != nil {
				t.Fatal(err) // the parent then sees an exit, not a kill
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKillsOnTheNthHit$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", EnvVar+"=before_commit@3")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exited %v, want killed", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child status %v, want SIGKILL", ws)
	}
	if n := strings.Count(string(out), "survived"); n != 2 {
		t.Fatalf("child survived %d hits, want 2", n)
	}
	if !strings.Contains(string(ee.Stderr), "crashpoint: before_commit hit 3: SIGKILL") {
		t.Fatalf("stderr lacks the crash line: %s", ee.Stderr)
	}
}

// BenchmarkHitUnarmed shows the cost on the production path.
func BenchmarkHitUnarmed(b *testing.B) {
	_ = Arm("")
	for b.Loop() {
		Hit("before_commit")
	}
}
