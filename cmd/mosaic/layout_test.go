package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestImportsRunDownTheLayout: the README's Layout puts each package in a
// layer (its table "Which package may import which"), and a package imports
// only packages of a layer below its own. The rule is read from the README
// and the arrows from the import graph (go list), so the two cannot drift.
func TestImportsRunDownTheLayout(t *testing.T) {
	layer := readmeLayers(t)
	list := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "mosaic/...")
	list.Dir = "../.."
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], "mosaic/")
		if !ok {
			continue
		}
		own, ok := layer[pkg]
		if !ok {
			t.Errorf("%s has no layer in the README's Layout: give it a row", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, "mosaic/")
			if !ok {
				continue
			}
			if l, known := layer[dep]; known && l <= own {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import runs only down the Layout's layers", pkg, own, dep, l)
			}
		}
	}
}

// readmeLayers reads the README's table of layers: package -> layer.
func readmeLayers(t *testing.T) map[string]int {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Which package may import which\n")
	if !ok {
		t.Fatal("the README has no section \"Which package may import which\"")
	}
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile(`(?m)^\| (\d+) \| ([^|]*) \|`)
	name := regexp.MustCompile("`([a-z/-]+)`")
	layer := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		for _, p := range name.FindAllStringSubmatch(m[2], -1) {
			if _, dup := layer[p[1]]; dup {
				t.Errorf("%s has two rows in the README's layers", p[1])
			}
			layer[p[1]] = n
		}
	}
	if len(layer) == 0 {
		t.Fatal("the README's layers table has no rows")
	}
	return layer
}
