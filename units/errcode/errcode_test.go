package errcode

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The README's table of exit codes names every code of the registry, each
// in the row of its exit class, and no other code: the two cannot drift.
func TestReadmeNamesEveryCode(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| ([123]) \\| (.*)\\|$")
	code := regexp.MustCompile("`([a-z][a-z-]*)`")
	inReadme := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			inReadme[c[1]] = int(m[1][0] - '0')
		}
	}
	if len(inReadme) == 0 {
		t.Fatal("the README has no table of exit codes (rows `| 1 | ... |`)")
	}
	var missing, extra, wrong []string
	for _, c := range All() {
		exit, ok := inReadme[c.Name]
		switch {
		case !ok:
			missing = append(missing, c.Name)
		case exit != c.Exit:
			wrong = append(wrong, c.Name)
		}
		delete(inReadme, c.Name)
	}
	for name := range inReadme {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	if len(missing)+len(extra)+len(wrong) > 0 {
		t.Errorf("README and registry differ: missing from the README %v; in the README but not registered %v; in the wrong row %v",
			missing, extra, wrong)
	}
}

func TestCodesAreKebabCaseWithAMeaning(t *testing.T) {
	kebab := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	for _, c := range All() {
		if !kebab.MatchString(c.Name) || strings.TrimSpace(c.Meaning) == "" || c.Exit < 1 || c.Exit > 3 {
			t.Errorf("code %+v: want a kebab-case name, a meaning and an exit class 1-3", c)
		}
	}
}
