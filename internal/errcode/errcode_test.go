package errcode

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// exitCodesPage is the reference page that lists every code.
const exitCodesPage = "../../docs/exit-codes.md"

// The reference's table of exit codes (docs/exit-codes.md) names every code
// of the registry, each in the row of its exit class, and no other code: the
// two cannot drift.
func TestDocsNameEveryCode(t *testing.T) {
	b, err := os.ReadFile(exitCodesPage)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## The codes\n")
	if !ok {
		t.Fatalf("%s has no section \"The codes\"", exitCodesPage)
	}
	table, _, _ = strings.Cut(table, "\n#")
	row := regexp.MustCompile(`(?m)^\| ([123]) \| (.*)\|$`)
	code := regexp.MustCompile("`([a-z][a-z-]*)`")
	inReadme := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			inReadme[c[1]] = int(m[1][0] - '0')
		}
	}
	if len(inReadme) == 0 {
		t.Fatalf("%s has no table of exit codes (rows `| 1 | ... |`)", exitCodesPage)
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
		t.Errorf("%s and the registry differ: missing from the page %v; in the page but not registered %v; in the wrong row %v",
			exitCodesPage, missing, extra, wrong)
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

// An error made with %w keeps its cause: errors.Is and errors.As reach it,
// while the message is one line and the code is the one made.
func TestNewKeepsItsCause(t *testing.T) {
	cause := &os.PathError{Op: "open", Path: "/x", Err: os.ErrNotExist}
	err := BadWorkspace.New("workspace /x: %w", cause)
	if !errors.Is(err, os.ErrNotExist) || !errors.Is(err, BadWorkspace.Target()) {
		t.Errorf("%v: want both its cause and its code seen by errors.Is", err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || pe != cause {
		t.Errorf("%v: errors.As does not find its cause", err)
	}
	if err.Message != "workspace /x: open /x: file does not exist" || Of(err).Code != "bad-workspace" {
		t.Errorf("message %q, code %q", err.Message, Of(err).Code)
	}
	if w := SystemdGone.Wrap(cause, "gone"); w.Message != "gone" || !errors.Is(w, os.ErrNotExist) {
		t.Errorf("Wrap: message %q, cause %v", w.Message, w.Unwrap())
	}
	if plain := BadName.New("no cause: %v", cause); plain.Unwrap() != nil {
		t.Errorf("%%v kept a cause: %v", plain.Unwrap())
	}
}

// The outer code wins: an error of one code made from an error of another
// (%w, or Wrap) is of the outer code, for Of and for the exit it maps to,
// however it is wrapped on the way up (fmt.Errorf's %w, one cause or
// several). The inner error stays reachable through errors.Is and
// errors.As. Checked to bite: with Of walking to the innermost *Error
// (errors.Unwrap in a loop), every case but one gets no-such-session; with
// New keeping only errors.Unwrap's answer, the inner code of "two causes"
// is lost.
func TestOuterCodeWins(t *testing.T) {
	inner := NoSuchSession.New("unit gone")
	for name, err := range map[string]error{
		"New %w":          StateDir.New("cannot settle: %w", inner),
		"Wrap":            StateDir.Wrap(inner, "cannot settle"),
		"fmt above New":   fmt.Errorf("context: %w", StateDir.New("cannot settle: %w", inner)),
		"two causes":      StateDir.New("cannot settle (%w), and undoing failed: %w", inner, os.ErrNotExist),
		"fmt, two causes": fmt.Errorf("%w; %w", StateDir.New("x: %w", inner), os.ErrPermission),
	} {
		e := Of(err)
		if e.Code != StateDir.Name || e.Exit != StateDir.Exit {
			t.Errorf("%s: Of gives %s (exit %d), want the outer %s", name, e.Code, e.Exit, StateDir.Name)
		}
		var got *Error
		if !errors.Is(err, NoSuchSession.Target()) || !errors.As(err, &got) || got.Code != StateDir.Name {
			t.Errorf("%s: the inner code is not reachable below the outer one", name)
		}
	}
}

// A cause given with more than one %w is kept whole: errors.Is finds each
// cause, and the message is fmt's. Checked to bite: with New keeping only
// errors.Unwrap's answer (nil for two %w), both errors.Is fail.
func TestNewKeepsEveryCause(t *testing.T) {
	err := StateDir.New("applied, but not recorded (%w), and undoing failed: %w", os.ErrPermission, os.ErrNotExist)
	if !errors.Is(err, os.ErrPermission) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%v: a cause is lost", err)
	}
	if want := "applied, but not recorded (permission denied), and undoing failed: file does not exist"; err.Message != want {
		t.Errorf("message %q, want %q", err.Message, want)
	}
}
