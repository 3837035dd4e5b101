package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// buildTags are the tags every build of mosaic uses (the Makefile's TAGS;
// the tests' builds of the binary under test too).
const buildTags = "urfave_cli_no_docs"

// The man page names every visible command (bus's under "bus") and each of
// its flags, and no line of text is taken for a roff request.
func TestManPage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	out := &output{stdout: &stdout, stderr: &stderr}
	if err := newApp(out).Run([]string{"mosaic", "man"}); err != nil || out.code != 0 {
		t.Fatalf("mosaic man: %v (exit %d) %s", err, out.code, stderr.String())
	}
	page := stdout.String()
	if !strings.HasPrefix(page, ".TH MOSAIC 1\n") {
		t.Fatalf("the page does not start with .TH:\n%.200s", page)
	}
	var walk func(heading string, cmds []*cli.Command)
	walk = func(heading string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			h := strings.TrimSpace(heading + " " + c.Name)
			if !strings.Contains(page, "\n.SS "+h+"\n") {
				t.Errorf("no heading .SS %s", h)
			}
			for _, f := range c.VisibleFlags() {
				n := f.Names()[0]
				dash := `\-\-`
				if len(n) == 1 {
					dash = `\-`
				}
				if !strings.Contains(page, `\fB`+dash+n+`\fR`) {
					t.Errorf("%s: no flag --%s", h, n)
				}
			}
			walk(h, c.Subcommands)
		}
	}
	walk("", newApp(&output{}).Commands)
	request := regexp.MustCompile(`^\.(TH|SH|SS|PP|TP|B|BR|I|br|nf|fi|RS|RE|nh|ad)( |$)`)
	for i, l := range strings.Split(page, "\n") {
		if (strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'")) && !request.MatchString(l) {
			t.Errorf("line %d is taken for a request: %q", i+1, l)
		}
	}
}

func TestRoffText(t *testing.T) {
	for in, want := range map[string]string{
		`a\b`:           `a\eb`,
		".x\n'y\nz.":    "\\&.x\n\\&'y\nz.",
		"plain -- text": "plain -- text",
	} {
		if got := roffText(in); got != want {
			t.Errorf("roffText(%q) = %q, want %q", in, got, want)
		}
	}
}

// The build leaves urfave/cli's docs, and with them blackfriday, out: the
// Makefile builds with the tag, and with it nothing links blackfriday.
func TestBuildLeavesDocsOut(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "\nTAGS = "+buildTags+"\n") {
		t.Errorf("the Makefile does not set TAGS = %s", buildTags)
	}
	for _, l := range strings.Split(string(mk), "\n") {
		if strings.Contains(l, "$(GO) build") && !strings.Contains(l, "-tags $(TAGS)") {
			t.Errorf("a build in the Makefile without -tags $(TAGS): %s", strings.TrimSpace(l))
		}
	}
	deps, err := exec.Command("go", "list", "-deps", "-tags", buildTags, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, deps)
	}
	for _, p := range strings.Fields(string(deps)) {
		if strings.Contains(p, "blackfriday") || strings.Contains(p, "md2man") {
			t.Errorf("mosaic built with -tags %s still links %s", buildTags, p)
		}
	}
}
