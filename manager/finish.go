package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/manager/clone"
	"mosaic/manager/clone/patchcheck"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/statedir"
	"mosaic/sandbox"
	"mosaic/units"
)

// finishScript is what a clone-mode session's finish step runs, in the
// session's copy, confined as the session was and without any network: it
// commits what the agent left (tracked and untracked, not ignored; with an
// index of its own, so the agent's is untouched) on top of the agent's own
// commits, and writes to $HOME/out (its own home, on disk: its /tmp is a
// tmpfs) the patch from the base (git diff --binary), a bundle of the
// commits since the user's own (refs/mosaic/snapshot), and the snapshot's
// id; for a patch over apply's bound, the list of files it changes (git
// diff --numstat), so that the change is still known and kept. Replace
// refs and grafts are off, so that the patch is of what the bundle holds
// (the host checks it again: clone.ApplyBranch). Nothing the session left
// in its repository can make it fail: git runs in a repository of the
// step's own ($HOME/git) that borrows the copy's objects and the user's,
// so the copy's config (a value git refuses, an unknown extension, a
// diff.orderFile), its hooks, refs and reflogs are never read; the copy's
// HEAD and index are taken only where git reads them (else the base, and
// no stat cache), and a .git the session removed leaves the files it left
// against the base. Filters and line-ending conversion are off
// ($GIT_DIR/info/attributes outranks every .gitattributes: the patch is of
// the bytes the agent left), and the patch is in git's path order
// (-O/dev/null), which patchcheck holds it to. Each submodule's repository
// is read the same way, in one of the step's own beside it. The host reads
// what the step wrote as untrusted data (patchcheck).
const finishScript = `set -eu
base=$1 parent=$2 bound=$3 out=$HOME/out top=$PWD
shift 3
rm -rf "$out" && mkdir -p "$out"
export GIT_NO_REPLACE_OBJECTS=1 GIT_GRAFT_FILE=/dev/null GIT_INDEX_FILE=/tmp/index GIT_WORK_TREE=$PWD GIT_AUTHOR_NAME=mosaic GIT_AUTHOR_EMAIL=mosaic@localhost GIT_COMMITTER_NAME=mosaic GIT_COMMITTER_EMAIL=mosaic@localhost
config() {
export GIT_CONFIG_COUNT=$(($# / 2)); i=0
while [ $# -gt 0 ]; do export GIT_CONFIG_KEY_$i="$1" GIT_CONFIG_VALUE_$i="$2"; i=$((i + 1)); shift 2; done
}
config core.hooksPath /dev/null core.fsmonitor false core.logAllRefUpdates false commit.gpgSign false core.bare false core.untrackedCache false core.splitIndex false gc.auto 0 maintenance.auto false core.sparseCheckout false
plain() { mkdir -p "$1/info" && printf '* -filter -text -eol -ident -working-tree-encoding\n' >"$1/info/attributes"; }
fmt=sha1
if [ ${#base} -eq 64 ]; then fmt=sha256; fi
own() {
rm -rf "$1" && mkdir -p "$1/objects/info" "$1/refs" && echo "ref: refs/heads/mosaic" >"$1/HEAD"
printf '[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = %s\n' $fmt >"$1/config"
for o in "$2/objects" "$2/` + units.ObjectsMount + `"; do if [ -d "$o" ]; then printf '%s\n' "$o"; fi; done >"$1/objects/info/alternates"
plain "$1"
if [ -f "$2/info/exclude" ]; then head -c 1048576 "$2/info/exclude" >"$1/info/exclude" || true; fi
}
index() {
if [ -f "$1/index" ]; then cp "$1/index" "$GIT_INDEX_FILE" || true; fi
git ls-files >/dev/null 2>&1 || rm -f "$GIT_INDEX_FILE"
}
head=$(GIT_DIR=$top/.git git rev-parse -q --verify 'HEAD^{commit}' 2>/dev/null || echo "$base")
g=$HOME/git
own "$g" "$top/.git"
export GIT_DIR=$g
git cat-file -e "$head^{commit}" 2>/dev/null || head=$base
index .git
git add -A --ignore-errors 2>"$out/add-errors" || true
n=0 alt=
sub() {
n=$((n + 1)) d=$top/.git/modules/$2
git --literal-pathspecs rm -rqf --cached --ignore-unmatch -- "$1" >/dev/null
git update-index --add --cacheinfo "160000,$(git rev-parse "$base:$1"),$1"
own "$g.$n" "$d"
(h=$(GIT_DIR=$d git rev-parse -q --verify 'HEAD^{commit}' 2>/dev/null || true)
export GIT_DIR="$g.$n" GIT_WORK_TREE="$top/$1" GIT_INDEX_FILE=/tmp/index.$n
if cd "$GIT_WORK_TREE" 2>/dev/null; then
index "$d"
git add -A --ignore-errors 2>>"$out/add-errors" || true
git write-tree
else git mktree </dev/null; fi >/tmp/tree.$n
if [ "$h" != "$3" ]; then printf '%s\0' "$1" >>"$out/moved"; fi)
q=$(printf '%s' "$g.$n/objects" | sed 's/[\\"]/\\&/g')
alt=$alt${alt:+:}\"$q\"
}
each() { f=$1; shift; while [ $# -ge 3 ]; do $f "$1" "$2" "$3"; shift 3; done; }
each sub "$@"
tree=$(git write-tree)
if [ "$tree" = "$(git rev-parse "$head^{tree}")" ]; then snap=$head
else snap=$(git commit-tree "$tree" -p "$head" -m "mosaic: what the agent left uncommitted"); fi
git update-ref refs/mosaic/snapshot "$snap"
from=$base to=$snap
if [ $n -gt 0 ]; then
export GIT_ALTERNATE_OBJECT_DIRECTORIES="$alt${GIT_ALTERNATE_OBJECT_DIRECTORIES:+:$GIT_ALTERNATE_OBJECT_DIRECTORIES}" GIT_INDEX_FILE=/tmp/index.all
put() {
n=$((n + 1)); git --literal-pathspecs rm -rqf --cached --ignore-unmatch -- "$1" >/dev/null
if [ "$side" = base ]; then t=$(git rev-parse "$3^{tree}"); else t=$(cat /tmp/tree.$n); fi
git read-tree -i --prefix="$1/" "$t"
}
withsubs() { side=$1; git read-tree "$2"; n=0; shift 2; each put "$@"; git write-tree; }
from=$(withsubs base "$base" "$@")
to=$(withsubs left "$snap" "$@")
fi
git -c core.quotePath=true -c diff.noprefix=false -c diff.mnemonicPrefix=false diff --binary --full-index --no-color --no-ext-diff --no-textconv --no-renames --no-relative -O/dev/null --src-prefix=a/ --dst-prefix=b/ "$from" "$to" -- >"$out/patch"
if [ "$(wc -c <"$out/patch")" -gt "$bound" ]; then git diff --numstat -z --no-renames --no-ext-diff --no-textconv "$from" "$to" -- >"$out/numstat"; fi
if [ "$snap" != "$parent" ]; then git bundle create -q "$out/bundle" refs/mosaic/snapshot ${parent:+"^$parent"}; fi
echo "$snap" >"$out/head"
rm -rf "$g" "$g".*
`

// finishTimeout bounds a finish step (it runs the agent's git config,
// which may never end); systemd stops it then (RuntimeMaxSec=).
const finishTimeout = 5 * time.Minute

// FinishDir is where session name's finish step leaves its output.
func FinishDir(p request.Paths, name string) string {
	return filepath.Join(p.SessionDir(units.FinishName(name)), "home", "out")
}

// Change is a clone-mode session's change as mosaic read it after a finish.
type Change struct {
	Patch   []byte
	Summary patchcheck.Summary
	// Refused is why apply would refuse it, nil when it would not.
	Refused   error
	Clone     records.Clone
	Dir       string // the finish step's output
	Workspace string // the user's checkout
	// AddErrors is what git add said it could not add (a nested
	// repository without a commit, an unreadable file): the change lacks it.
	AddErrors string
	// Moved are the submodules whose HEAD the session moved (it committed
	// there, or checked out another commit): the change holds their
	// files, never a new gitlink.
	Moved []string
}

// Finish runs session name's finish step as a transient service of its own
// (mosaic-NAME-finish.service: the session's sandbox, network none) and
// reads what it wrote as data: the patch through patchcheck, which also
// makes the summary. It records the snapshot in clone.json.
func (m *Manager) Finish(ctx context.Context, name string) (Change, error) {
	p, err := m.Paths()
	if err != nil {
		return Change{}, err
	}
	dir := p.SessionDir(name)
	rec, err := records.ReadChecked(dir)
	if err != nil {
		return Change{}, errNoSession(name)
	}
	cl, ok := records.ReadClone(dir)
	if !ok {
		return Change{}, errcode.NoChange.New("session %s is not in clone mode: it wrote %s itself", name, rec.Workspace)
	}
	if cl.Discarded {
		return Change{}, errcode.NoChange.New("session %s's change was discarded", name)
	}
	plan, err := m.finishPlan(name, rec, *cl, p)
	if err != nil {
		return Change{}, err
	}
	// The step's output, read back through the descriptor: a file with no
	// name, so that a diff, apply or run killed meanwhile leaves none.
	log, err := statedir.FinishLog(p.StateRoot, name)
	if err != nil {
		return Change{}, errcode.StateDir.New("cannot run the finish step of %s: %w", name, err)
	}
	defer log.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return Change{}, errcode.Unexpected.New("%w", err)
	}
	defer null.Close()
	began := time.Now()
	s, err := m.Run(ctx, plan, [3]int{int(null.Fd()), int(log.Fd()), int(log.Fd())}, nil)
	if err != nil {
		return Change{}, err
	}
	if code := s.ExitCode(); code != 0 {
		out, _ := io.ReadAll(io.NewSectionReader(log, 0, 4096))
		return Change{}, errcode.CloneFailed.New("the finish step of session %s failed (exit %d): %s", name, code, termsafe.Escape(strings.TrimSpace(string(out)), false))
	}
	ch, err := readChange(p, name, *cl)
	if err != nil {
		return Change{}, err
	}
	ch.Clone.Snapshot = &began
	if cur, ok := records.ReadClone(dir); ok && cur.Applied == "" && !cur.Discarded {
		if err := records.WriteClone(dir, ch.Clone); err != nil {
			return Change{}, errcode.StateDir.New("cannot record the snapshot of %s: %w", name, err)
		}
	}
	return ch, nil
}

// readChange reads what session name's last finish step wrote, as data.
func readChange(p request.Paths, name string, cl records.Clone) (Change, error) {
	ch := Change{Clone: cl, Dir: FinishDir(p, name)}
	ch.Clone.PatchBytes = 0
	if rec, ok := records.Read(p.SessionDir(name)); ok {
		ch.Workspace = rec.Workspace
	}
	head, err := clone.ReadOutput(filepath.Join(ch.Dir, "head"), 64)
	if err == nil && !patchcheck.IsObjectID(strings.TrimSpace(string(head))) {
		err = fmt.Errorf("its head is not an object id")
	}
	if err == nil {
		ch.Patch, err = clone.ReadOutput(filepath.Join(ch.Dir, "patch"), patchcheck.MaxPatchBytes)
	}
	var refusal *patchcheck.Refusal
	switch {
	case errors.As(err, &refusal):
		ch.Summary, ch.Clone.PatchBytes = overBound(ch.Dir)
		ch.Refused = &patchcheck.Refusal{Why: fmt.Sprintf("the change is %d MB, over apply's bound of %d MB: `mosaic apply --branch %s` makes a branch of it instead", (ch.Clone.PatchBytes+1<<20-1)>>20, patchcheck.MaxPatchBytes>>20, name)}
	case err != nil:
		return Change{}, errcode.CloneFailed.New("cannot read what the finish step of session %s wrote: %w", name, err)
	default:
		ch.Summary, ch.Refused = patchcheck.Parse(ch.Patch)
	}
	if b, err := clone.ReadOutput(filepath.Join(ch.Dir, "add-errors"), 4096); err == nil {
		ch.AddErrors = strings.TrimSpace(string(b))
	}
	ch.Moved = moved(ch.Dir, cl.Subs)
	ch.Clone.Head, ch.Clone.Summary = strings.TrimSpace(string(head)), &ch.Summary
	ch.Clone.Refused = ""
	if ch.Refused != nil {
		ch.Clone.Refused = ch.Refused.Error()
	}
	return ch, nil
}

// overBound reads the file list the finish step in dir wrote for a patch
// over apply's bound, and the patch's size: the change apply refuses is
// still known (list, status, diff say it) and kept (rm, gc). A list that
// is missing or refused leaves one entry that says so, never none.
func overBound(dir string) (patchcheck.Summary, int64) {
	var size int64 = patchcheck.MaxPatchBytes + 1
	if fi, err := os.Lstat(filepath.Join(dir, "patch")); err == nil {
		size = fi.Size()
	}
	b, err := clone.ReadOutput(filepath.Join(dir, "numstat"), patchcheck.MaxNumstatBytes)
	if err == nil {
		if s, err := patchcheck.ParseNumstat(b); err == nil && len(s.Files) > 0 {
			return s, size
		}
	}
	return patchcheck.Summary{Files: []patchcheck.File{{Path: "(files not listed)", Status: "unknown"}}}, size
}

// finishPlan is the finish step's session: the session's own sandbox
// around its copy (the same workspace, binds and identities), with no
// network, no credentials, a home and /tmp of its own
// (StateRoot/sessions/NAME-finish), running finishScript. It is planned as
// every session is (newPlan, on this manager's host: planHost), the request
// under the step's name and the session's copy.
func (m *Manager) finishPlan(name string, rec records.Record, cl records.Clone, p request.Paths) (Plan, error) {
	h, err := m.planHost()
	if err != nil {
		return Plan{}, err
	}
	if h.BwrapErr != nil {
		return Plan{}, noSandbox(h.BwrapErr, "the finish step runs in the session's sandbox")
	}
	req := request.Request{
		Workspace: rec.Workspace, Network: sandbox.NetworkNone, Profile: "generic", Mode: request.ModeClone, Own: true,
		Limits:  units.Limits{RuntimeMax: finishTimeout},
		Command: append([]string{"/bin/sh", "-c", finishScript, "mosaic-finish", cl.Base, cl.Parent, strconv.Itoa(patchcheck.MaxPatchBytes)}, subArgs(cl.Subs)...),
		Env:     []string{"LANG=C.UTF-8", "PATH=" + sandbox.DefaultPath},
	}
	h.Paths = p
	return newPlan(req, h, func(spec *units.Spec) error {
		fname := units.FinishName(name)
		spec.Name, spec.NameGiven, spec.StateDir = fname, true, p.SessionDir(fname)
		spec.Clone = &units.Clone{Dir: filepath.Join(p.SessionDir(name), units.CloneDirName), Objects: spec.Clone.Objects, Base: cl.Base, Parent: cl.Parent, Ref: cl.Ref, Kind: cl.Kind, Subs: cloneSubs(cl.Subs)}
		if err := cloneIDs(spec); err != nil {
			return errcode.NoChange.New("session %s's copy is gone (%w): nothing to finish", name, err)
		}
		return nil
	})
}

// subArgs are the finish step's arguments of a copy's submodules: each
// one's path, git directory under .git/modules and starting commit.
func subArgs(subs []records.Submodule) []string {
	var args []string
	for _, s := range subs {
		args = append(args, s.Path, s.Module, s.Base)
	}
	return args
}

// moved reads the submodules whose HEAD the finish step in dir found
// moved, as data: only the copy's own submodules' paths count.
func moved(dir string, subs []records.Submodule) []string {
	b, err := clone.ReadOutput(filepath.Join(dir, "moved"), 64<<10)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range strings.Split(string(b), "\x00") {
		for _, s := range subs {
			if s.Path == p {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// InSubmodule is the first submodule of cl that the change ch reaches
// (a file in it, or its HEAD moved): "" for none. apply --branch refuses
// such a change: the branch would hold the superproject's commits only.
func InSubmodule(ch Change) string {
	if len(ch.Moved) > 0 {
		return ch.Moved[0]
	}
	for _, f := range ch.Summary.Files {
		for _, p := range []string{f.Path, f.OldPath} {
			for _, s := range ch.Clone.Subs {
				if p != "" && strings.HasPrefix(p, s.Path+"/") {
					return s.Path
				}
			}
		}
	}
	return ""
}
