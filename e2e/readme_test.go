package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/proctest"
	"github.com/settlehq/settle/record"
)

// repoRoot is the repository this test runs in (e2e's parent).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// buildLine is how the README builds the binary: its first shell line that
// runs `go build -o PATH ./cmd/settle`.
var buildLine = regexp.MustCompile(`(?m)^go build -o (\S+) \./cmd/settle$`)

// readmeCommands parses README.md in root: the commands of the first code
// block under "## Try it" (comments dropped) and the build command, so the
// tests run what the README says and cannot drift from it.
func readmeCommands(t *testing.T, root string) (tryIt []string, build string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "\n## Try it")
	if i < 0 {
		t.Fatal("README.md has no \"## Try it\" section")
	}
	rest := readme[i:]
	start := strings.Index(rest, "```sh\n")
	if start < 0 {
		t.Fatal("README.md's \"Try it\" section has no ```sh block")
	}
	block := rest[start+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	for _, l := range strings.Split(block, "\n") {
		if j := strings.Index(l, "#"); j >= 0 {
			l = l[:j]
		}
		if l = strings.TrimSpace(l); l != "" {
			tryIt = append(tryIt, l)
		}
	}
	if len(tryIt) == 0 {
		t.Fatal("README.md's \"Try it\" block has no command")
	}
	m := buildLine.FindString(readme)
	if m == "" {
		t.Fatalf("README.md has no line matching %s", buildLine)
	}
	return tryIt, m
}

// shell runs a command line with sh in dir, failing the test unless it exits 0.
func shell(t *testing.T, dir, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = proctest.CleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("in %s: %s: %v\n%s", dir, line, err, out.String())
	}
	return out.String()
}

// TestReadmeCommands clones the repository (its committed HEAD) into a
// fresh directory, as a new user would, and runs the README's build command
// there exactly as written: it must write a binary that runs (`--help`
// exits 0), and the output must be ignored by git, so the clone stays
// clean. The "Try it" block must be the two commands the other tests run:
// `go run ./cmd/settle dev` (TestFreshUser runs it) and `.ci/run`, which
// must be an executable bash script in the clone.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed: this test clones the repository (apt-get install git)")
	}
	clone := filepath.Join(t.TempDir(), "settle")
	shell(t, repoRoot(t), "git clone -q . "+clone)

	tryIt, build := readmeCommands(t, clone)
	if len(tryIt) != 2 || tryIt[0] != "go run ./cmd/settle dev" || tryIt[1] != ".ci/run" {
		t.Errorf("README's \"Try it\" commands: %q, want [go run ./cmd/settle dev, .ci/run]", tryIt)
	}
	if fi, err := os.Stat(filepath.Join(clone, ".ci", "run")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf(".ci/run in a fresh clone: want an executable file (%v)", err)
	}
	shell(t, clone, "bash -n .ci/run && bash -n .ci/postgres.bash")

	shell(t, clone, build)
	bin := filepath.Join(clone, buildLine.FindStringSubmatch(build)[1])
	if fi, err := os.Stat(bin); err != nil {
		t.Fatalf("%q did not write %s: %v", build, bin, err)
	} else if !fi.Mode().IsRegular() {
		t.Fatalf("after %q, %s is not a binary but %v (go build wrote into it)", build, bin, fi.Mode())
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: settle <command>") {
		t.Errorf("%s --help after %q: %v\n%s", bin, build, err, out)
	}
	if st := shell(t, clone, "git status --porcelain"); st != "" {
		t.Errorf("after %q the clone is not clean (the build output is not ignored):\n%s", build, st)
	}
}

// TestReadmeRecordsDecode decodes every line of the README's JSON blocks as
// settle will, so the records it tells a user to send are ones settle takes
// (one object per line: a record wrapped over several lines is not).
// Seen failing on a record wrapped over three lines.
func TestReadmeRecordsDecode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := record.NewDecoder(record.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(b), "```json\n")[1:] {
		block = block[:strings.Index(block, "```")]
		for i, line := range strings.Split(strings.TrimSpace(block), "\n") {
			n++
			if d := fingerprint.Prepare(dec, []byte(line), nil); d.Err != nil {
				t.Errorf("README.md, a JSON block's line %d is not a record settle takes: %v\n%s", i+1, d.Err, line)
			}
		}
	}
	if n == 0 {
		t.Fatal("README.md has no ```json block")
	}
}
