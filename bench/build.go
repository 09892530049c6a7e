package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
)

// Build names the binary whose service the end-to-end, latency, scale and
// core-only figures are of: the service's packages run in-process in the
// bench program, so these figures are of that build (its commit, and the
// profile its profile-guided build used), not of a settle binary built
// apart. The edge figures are of the settle binary the edge part drives
// (EdgeResult.Binary).
type Build struct {
	Path     string `json:"path"`
	Revision string `json:"revision,omitempty"` // vcs.revision, "+modified" when the tree had changes
	PGO      string `json:"pgo"`                // the -pgo build setting: the profile's base name, or "off"
}

// thisBuild is the Build of the running executable.
func thisBuild() Build {
	b := Build{PGO: "off"}
	b.Path, _ = os.Executable()
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value + b.Revision
		case "vcs.modified":
			if s.Value == "true" {
				b.Revision += "+modified"
			}
		case "-pgo":
			b.PGO = filepath.Base(s.Value)
		}
	}
	return b
}

func (b Build) String() string {
	s := b.Path
	if b.Revision != "" {
		s += " at " + b.Revision
	}
	return s + ", profile-guided: " + b.PGO
}

// serviceBinary is the settle binary whose `settle run` the edge part of
// the bench program at bench drives: edgeBinary if given, else the
// `settle` beside it (go build -o DIR/ ./cmd/settle ./cmd/settle-bench
// puts them there).
func serviceBinary(bench, edgeBinary string) (string, error) {
	if edgeBinary != "" {
		return edgeBinary, nil
	}
	p := filepath.Join(filepath.Dir(bench), "settle")
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		return "", fmt.Errorf("the edge part drives a settle binary's `settle run` and found none at %s: "+
			"give --edge-binary PATH (go build -o PATH ./cmd/settle), or leave the edge part out (--only)", p)
	}
	return p, nil
}

// side is one build of a comparison: the command that runs its bench's
// end-to-end part (the service in-process there) and the settle binary
// whose `settle run` its edge part drives.
type side struct {
	bench   []string
	service string
}

// compareSide is the side of binary, the other build of a comparison: a
// settle release from before settle-bench, whose own `settle bench` runs
// the end-to-end part and whose `settle run` the edge part, or a
// settle-bench, whose edge part drives the settle beside it. needEdge says
// whether the edge part runs.
func compareSide(ctx context.Context, binary string, needEdge bool) (side, error) {
	if _, err := os.Stat(binary); err != nil {
		return side{}, fmt.Errorf("compare: %w", err)
	}
	if hasBenchCommand(ctx, binary) {
		return side{bench: []string{binary, "bench"}, service: binary}, nil
	}
	s := side{bench: []string{binary}}
	if needEdge {
		var err error
		if s.service, err = serviceBinary(binary, ""); err != nil {
			return side{}, err
		}
	}
	return s, nil
}

// hasBenchCommand tells a settle release that still has `settle bench`
// (its help exits 0) from a settle-bench, which takes no command.
func hasBenchCommand(ctx context.Context, binary string) bool {
	return exec.CommandContext(ctx, binary, "bench", "--help").Run() == nil
}
