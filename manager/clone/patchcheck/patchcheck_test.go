package patchcheck

import (
	"errors"
	"strings"
	"testing"
)

func TestVerifyPath(t *testing.T) {
	for _, p := range []string{".git", ".git/hooks/x", "a/.git/config", ".GIT/config", ".Git", "sub/.gIt/HEAD", ".git./x", ".git /x",
		".git::$INDEX_ALLOCATION/x", "GIT~1/config", "git~1/hooks", ".g\u200cit/config", "\ufeff.git/x", ".git\u200d/x",
		"../x", "a/../../x", "/etc/passwd", "a//b", "a/", "", ".", "a/./b", `a\.git\config`, ".gitmodules", "x/.GITMODULES", "gitmod~1"} {
		if err := VerifyPath(p); err == nil {
			t.Errorf("VerifyPath(%q) accepted", p)
		}
	}
	for _, p := range []string{"a", "a/b.go", ".github/workflows/ci.yml", ".gitignore", ".gitattributes", "git", "x.git", ".gitx/y", "src/git~2x"} {
		if err := VerifyPath(p); err != nil {
			t.Errorf("VerifyPath(%q): %v", p, err)
		}
	}
}

const okPatch = `diff --git a/a.txt b/a.txt
index 5626abf0f72e58d7a153368ba57db4c673c0e171..f9a2d4d7a5a3bd0f4f1ba17b2b2c3a9d1b52a6a1 100644
--- a/a.txt
+++ b/a.txt
@@ -1 +1,2 @@
 one
+two
diff --git a/bin.dat b/bin.dat
new file mode 100644
index 0000000000000000000000000000000000000000..e69de29bb2d1d6434b8b29ae775ad8c2e48c5391
GIT binary patch
literal 3
KcmZQzWMT#Y01f~L

literal 0
HcmV?d00001

diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index 5626abf0f72e58d7a153368ba57db4c673c0e171..0000000000000000000000000000000000000000
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-one
diff --git a/link b/link
new file mode 120000
index 0000000000000000000000000000000000000000..2e65efe2a145dda7ee51d1741299f848e5bf752e
--- /dev/null
+++ b/link
@@ -0,0 +1 @@
+a.txt
\ No newline at end of file
diff --git "a/sp ace\n" "b/sp ace\n"
new file mode 100644
index 0000000000000000000000000000000000000000..5626abf0f72e58d7a153368ba57db4c673c0e171
--- /dev/null
+++ "b/sp ace\n"
@@ -0,0 +1 @@
+one
diff --git a/Makefile b/Makefile
new file mode 100644
index 0000000000000000000000000000000000000000..5626abf0f72e58d7a153368ba57db4c673c0e171
--- /dev/null
+++ b/Makefile
@@ -0,0 +1 @@
+one
`

func TestParse(t *testing.T) {
	s, err := Parse([]byte(okPatch))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Line(); got != "7 files, +4 -1" {
		t.Errorf("summary %q", got)
	}
	if s.ModeChanges != 1 || s.Files[1].Binary != true || s.Files[3].OldPath != "gone.txt" || s.Files[3].Path != "" {
		t.Errorf("files %+v", s.Files)
	}
	if s.Files[4].Target != "a.txt" || s.Files[5].Path != "sp ace\n" || s.Files[6].HostRun == "" {
		t.Errorf("files %+v", s.Files)
	}
}

// TestParseOrder: git's own order, each directory's files together (and
// a type change, one path deleted then added), is read.
func TestParseOrder(t *testing.T) {
	typeChange := "diff --git a/l b/l\ndeleted file mode 100644\n--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n" + newFile("l", "120000", "a")
	for name, p := range map[string]string{
		"sorted":      newFile("d/.gitattributes", "100644", "* ident") + newFile("d/file", "100644", "x") + newFile("e/x", "100644", "x"),
		"nested":      newFile("+", "100644", "x") + newFile("d/.gitattributes", "100644", "* ident") + newFile("d/s/t/x", "100644", "x") + newFile("d/u/x", "100644", "x") + newFile("d/y", "100644", "x") + newFile("z", "100644", "x"),
		"type change": typeChange + newFile("m/x", "100644", "x"),
	} {
		if _, err := Parse([]byte(p)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// hdr is a new file's patch at path with content lines.
func newFile(path, mode string, lines ...string) string {
	var b strings.Builder
	b.WriteString("diff --git a/" + path + " b/" + path + "\nnew file mode " + mode + "\n--- /dev/null\n+++ b/" + path + "\n")
	b.WriteString("@@ -0,0 +1," + string(rune('0'+len(lines))) + " @@\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

func TestParseRefuses(t *testing.T) {
	for name, p := range map[string]string{
		"dotdot":            newFile("../x", "100644", "x"),
		"hooks":             newFile(".git/hooks/post-checkout", "100755", "#!/bin/sh"),
		"GIT config":        newFile(".GIT/config", "100644", "[core]"),
		"ntfs":              newFile("git~1/config", "100644", "[core]"),
		"hfs":               newFile(".g\u200cit/config", "100644", "[core]"),
		"nested .git":       newFile("src/.git/config", "100644", "[core]"),
		"gitmodules":        newFile(".gitmodules", "100644", "[submodule]"),
		"symlink out":       newFile("l", "120000", "../../etc"),
		"symlink abs":       newFile("l", "120000", "/home/u/.ssh"),
		"symlink to .git":   newFile("l", "120000", ".git/hooks"),
		"write through":     newFile("l", "120000", "sub") + newFile("l/x", "100644", "x"),
		"gitlink":           "diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..1111111\n--- /dev/null\n+++ b/sub\n@@ -0,0 +1 @@\n+Subproject commit 1111111111111111111111111111111111111111\n",
		"odd mode":          newFile("x", "104755", "x"),
		"mismatch":          "diff --git a/x b/x\n--- a/x\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n",
		"rename into git":   "diff --git a/x b/.git/x\nsimilarity index 100%\nrename from x\nrename to .git/x\n",
		"garbage":           "hello\n",
		"unknown header":    "diff --git a/x b/x\nfrobnicate\n",
		"short hunk":        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n",
		"long hunk":         "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n",
		"no newline":        "diff --git a/x b/x\n--- a/x",
		"binary no data":    "diff --git a/x b/x\nBinary files a/x and b/x differ\n",
		"gitlink by index":  "diff --git a/sub b/sub\nindex 1111111..2222222 160000\n--- a/sub\n+++ b/sub\n@@ -1 +1 @@\n-Subproject commit 1111111111111111111111111111111111111111\n+Subproject commit 2222222222222222222222222222222222222222\n",
		"retarget out":      "diff --git a/l b/l\nindex 1111111..2222222 120000\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+../../x\n\\ No newline at end of file\n",
		"target 2nd line":   "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1,2 @@\n+a\n+/../../../x\n",
		"bad index":         "diff --git a/x b/x\nindex 1111111..2222222 0120000\n",
		"binary after hunk": "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n",
		"cr name":           "diff --git a/x\r b/x\r\n--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\n-a\n+b\n",
		"back to a dir":     newFile("d/.gitattributes", "100644", "* ident eol=crlf") + newFile("e/x", "100644", "x") + newFile("d/file", "100644", "$Id$"),
		"back to a parent":  newFile("d/.gitattributes", "100644", "* ident") + newFile("d/s/x", "100644", "x") + newFile("e", "100644", "x") + newFile("d/s/y", "100644", "$Id$"),
	} {
		_, err := Parse([]byte(p))
		var r *Refusal
		if !errors.As(err, &r) {
			t.Errorf("%s: not refused (%v)", name, err)
		}
	}
	if _, err := Parse(make([]byte, MaxPatchBytes+1)); err == nil {
		t.Error("a patch over the bound was accepted")
	}
}

func TestBundleHeader(t *testing.T) {
	id, other := strings.Repeat("a", 40), strings.Repeat("b", 40)
	good := "# v2 git bundle\n-" + other + " base\n" + id + " " + SnapshotRef + "\n\nPACK"
	b, err := ParseBundleHeader([]byte(good))
	if err != nil || CheckBundle(b, id) != nil || len(b.Prereqs) != 1 {
		t.Fatalf("%+v %v", b, err)
	}
	for name, h := range map[string]string{
		"elsewhere":   "# v2 git bundle\n" + id + " refs/heads/main\n\n",
		"two refs":    "# v2 git bundle\n" + id + " " + SnapshotRef + "\n" + other + " refs/heads/x\n\n",
		"other head":  "# v2 git bundle\n" + other + " " + SnapshotRef + "\n\n",
		"corrupt":     "PK\x03\x04 not a bundle",
		"no end":      "# v2 git bundle\n" + id + " " + SnapshotRef + "\n",
		"capability":  "# v3 git bundle\n@filter=blob:none\n" + id + " " + SnapshotRef + "\n\n",
		"short id":    "# v2 git bundle\nabc " + SnapshotRef + "\n\n",
		"no ref line": "# v2 git bundle\n\n",
	} {
		b, err := ParseBundleHeader([]byte(h))
		if err == nil {
			err = CheckBundle(b, id)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(okPatch))
	f.Add([]byte(newFile("l", "120000", "sub") + newFile("l/x", "100644", "x")))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		// Whatever is accepted names only paths VerifyPath accepts, no gitlink, no symlink out.
		for _, file := range s.Files {
			for _, p := range []string{file.Path, file.OldPath} {
				if p != "" && VerifyPath(p) != nil {
					t.Fatalf("accepted %q", p)
				}
			}
			if file.NewMode == "160000" || file.OldMode == "160000" {
				t.Fatalf("accepted a gitlink")
			}
			if file.Target != "" && (strings.HasPrefix(file.Target, "/") || checkTarget(file.Path, file.Target) != nil) {
				t.Fatalf("accepted symlink %q -> %q", file.Path, file.Target)
			}
		}
	})
}

func FuzzBundleHeader(f *testing.F) {
	id := strings.Repeat("a", 40)
	f.Add([]byte("# v2 git bundle\n-" + strings.Repeat("b", 40) + " x\n" + id + " " + SnapshotRef + "\n\nPACK"))
	f.Add([]byte("# v3 git bundle\n@object-format=sha1\n" + id + " refs/heads/x\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBundleHeader(b)
		if err != nil {
			return
		}
		for name, id := range h.Refs {
			if !IsObjectID(id) || !strings.HasPrefix(name, "refs/") {
				t.Fatalf("accepted ref %q at %q", name, id)
			}
		}
		if CheckBundle(h, id) == nil && (len(h.Refs) != 1 || h.Refs[SnapshotRef] != id) {
			t.Fatalf("CheckBundle accepted %+v", h)
		}
	})
}

// TestHostRunNamesWhatDirectModeProtects: every file the host's tools run
// from a workspace, which direct mode protects (sandbox.HostExecEntries
// and the names looked for at any depth), is named at the top of mosaic
// diff, also below the top; a plain source file is not.
func TestHostRunNamesWhatDirectModeProtects(t *testing.T) {
	for _, p := range []string{
		"rust-toolchain.toml", "crates/a/rust-toolchain", ".cargo/config.toml", "crates/a/.cargo/config",
		".tool-versions", "web/.tool-versions", "mise.toml", "web/.mise.toml", ".mise/config.toml", ".config/mise/config.toml",
		"opencode.json", ".opencode/plugins/x.js", ".pi/settings.json", ".pi/extensions/x.ts", ".codex/config.toml", ".gemini/settings.json",
		"web/.vscode/settings.json", "web/.idea/workspace.xml", "web/.npmrc", "web/.envrc",
		".venv/lib/python3.11/site-packages/x.pth", "sitecustomize.py", "flake.lock", ".lfsconfig",
	} {
		if HostRun(p) == "" {
			t.Errorf("%s is not named as a file the host's tools run", p)
		}
	}
	if r := HostRun("src/main.go"); r != "" {
		t.Errorf("src/main.go named: %s", r)
	}
}

// TestNewProgramNamed: a file the change makes executable (new, or its
// mode changed to 100755) is named at the top of mosaic diff: a shell runs
// it by name where an .envrc puts its directory on PATH; one that was
// executable already, or is not, is not named for it.
func TestNewProgramNamed(t *testing.T) {
	p := newFile("bin/git", "100755", "#!/bin/sh") + newFile("src/a.txt", "100644", "x") +
		"diff --git a/tool b/tool\nold mode 100644\nnew mode 100755\n"
	s, err := Parse([]byte(p))
	if err != nil {
		t.Fatal(err)
	}
	if s.Files[0].HostRun == "" || s.Files[2].HostRun == "" || s.Files[1].HostRun != "" {
		t.Errorf("files %+v", s.Files)
	}
}
