package layout

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/settlehq/settle/"

// TestImportsFollowTheMap reads every package's imports (go list, tests
// excluded) and fails on one that runs up or sideways against Floors, on a
// production package that imports test support, and on a package the map
// does not place.
func TestImportsFollowTheMap(t *testing.T) {
	// -pgo=off: with cmd/settle's default.pgo, go list names the packages
	// built for that binary as variants ("record [.../cmd/settle]").
	out, err := exec.Command("go", "list", "-pgo=off", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var bad []string
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "|")
		pkg = strings.TrimPrefix(pkg, module)
		seen[pkg] = true
		floor, ok := Floors[pkg]
		if !ok {
			bad = append(bad, pkg+": not on the map (internal/layout.Floors, docs/design.md)")
			continue
		}
		for _, imp := range strings.Split(imports, ",") {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			to, ok := Floors[imp]
			switch {
			case !ok:
				bad = append(bad, pkg+" imports "+imp+", which is not on the map")
			case to >= floor:
				bad = append(bad, pkg+" (floor "+itoa(floor)+") imports "+imp+" (floor "+itoa(to)+"): imports go down only")
			case TestSupport[imp] && !TestSupport[pkg] && floor < TestsFloor:
				bad = append(bad, pkg+" imports test support "+imp)
			}
		}
	}
	for pkg := range Floors {
		if !seen[pkg] {
			bad = append(bad, pkg+": on the map but not in the module")
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

func itoa(n int) string { return string(rune('0' + n)) }
