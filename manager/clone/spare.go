package clone

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
	"mosaic/units"
)

// A spare is a copy of a repository made ahead, for its next session to
// take instead of checking out every file (MakeSpare, TakeSpare): a clone
// no session has had, checked out at the repository's HEAD of the moment
// it was made. The session that takes it resets it to its own base with
// one checkout, which writes only the files that differ, so that a start
// after the first costs what changed since, not the repository's size.
// Nothing of one session reaches the next: a spare is made anew by
// mosaic (in a unit of its own, once a session's copy is made), never
// from a copy a session had. A spare lives in the state root, which no
// session sees: SparesDir/KEY/copy, beside its record spare.json.

// SparesDir is where the spares are kept, in the state root.
func SparesDir(stateRoot string) string { return filepath.Join(stateRoot, "spares") }

// SpareKey names the spare of the repository at ws: its directory in
// SparesDir, and the unit that makes it (units.SpareUnitName).
func SpareKey(ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return hex.EncodeToString(sum[:8])
}

// spareDir is the spare of the repository at ws.
func spareDir(stateRoot, ws string) string {
	return filepath.Join(SparesDir(stateRoot), SpareKey(ws))
}

// The names in a spare's directory.
const (
	spareCopy   = "copy"
	spareRecord = "spare.json"
)

// spare is a spare's record: the repository it is of, by path and by
// identity, and the object store its copy borrows from.
type spare struct {
	Workspace string    `json:"workspace"`
	ID        string    `json:"id"` // sandbox.StatID of the workspace when the spare was made
	Objects   string    `json:"objects"`
	Made      time.Time `json:"made"`
}

// HasSpare reports whether the repository at ws has a spare ready.
func HasSpare(stateRoot, ws string) bool {
	_, err := os.Lstat(filepath.Join(spareDir(stateRoot, ws), spareCopy))
	return err == nil
}

// MakeSpare makes the spare of the repository at ws (objects, its object
// store) unless it has one. It is made aside and named in one rename, so
// that a spare is whole or absent; a repository without a commit gets
// none. git runs in the user's repository as for a session's copy (Make),
// started in the directory it opened, whose identity the record keeps.
func MakeSpare(ctx context.Context, stateRoot, ws, objects string) error {
	dir := spareDir(stateRoot, ws)
	if HasSpare(stateRoot, ws) {
		return nil
	}
	f, err := os.OpenFile(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	pinned := Pinned(int(f.Fd()))
	head, err := git(ctx, pinned, nil, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil || head == "" {
		return nil // no commit yet: nothing to check out ahead
	}
	if err := os.MkdirAll(SparesDir(stateRoot), 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(SparesDir(stateRoot), ".making-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	held, err := lockDir(tmp, true) // gc leaves a making alone (RemoveSpares)
	if err != nil {
		return err
	}
	defer held.Close()
	cp := filepath.Join(tmp, spareCopy)
	if _, err := git(ctx, pinned, nil, "clone", "-q", "--shared", "--no-checkout", ".", cp); err != nil {
		return err
	}
	if _, err := git(ctx, cp, nil, "-c", parallelCheckout, "checkout", "-q", "--detach", head); err != nil {
		return err
	}
	if err := settleIndex(ctx, cp); err != nil {
		return err
	}
	testSpareStep("made", tmp)
	b, _ := json.Marshal(spare{Workspace: ws, ID: sandbox.StatID(st), Objects: objects, Made: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(tmp, spareRecord), b, 0o600); err != nil {
		return err
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE)
	if err == unix.EEXIST { // another made it meanwhile
		return nil
	}
	return err
}

// TakeSpare moves the spare of the repository at ws into to (which must
// not exist) when there is one made of the same directory (id, its
// identity now) borrowing the same objects, and says whether it did. A
// spare taken is gone: one rename takes it, so two starts never share it.
// One that does not match is removed. The spare is locked (lockDir) before
// it is renamed, so that gc never removes one being taken.
func TakeSpare(stateRoot, ws, id, objects, to string) bool {
	dir := spareDir(stateRoot, ws)
	held, err := lockDir(dir, false)
	if err != nil {
		return false // none, or gc or another start has it
	}
	defer held.Close()
	taking := filepath.Join(SparesDir(stateRoot), ".taking-"+filepath.Base(dir)+"-"+strconv.Itoa(os.Getpid()))
	if os.Rename(dir, taking) != nil {
		return false
	}
	defer os.RemoveAll(taking)
	testSpareStep("taking", taking)
	var s spare
	b, err := os.ReadFile(filepath.Join(taking, spareRecord))
	if err != nil || json.Unmarshal(b, &s) != nil || s.Workspace != ws || s.ID != id || s.Objects != objects {
		return false
	}
	return unix.Renameat2(unix.AT_FDCWD, filepath.Join(taking, spareCopy), unix.AT_FDCWD, to, unix.RENAME_NOREPLACE) == nil
}

// RemoveSpares removes the spares of repositories that are gone, those
// made more than maxAge ago, and what a making or taking killed midway
// left (older than a minute, its lock free); it returns how many it
// removed. An entry whose lock is held is left alone: a making (which can
// take minutes at the idle I/O priority, its directory's time that of its
// start) or a taking (its directory's time that of the spare's making).
// Removing one midway would leave files missing from a spare or a
// session's copy whose index still holds them, which the session's change
// then shows deleted.
func RemoveSpares(stateRoot string, maxAge time.Duration) int {
	entries, err := os.ReadDir(SparesDir(stateRoot))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if removeSpare(filepath.Join(SparesDir(stateRoot), e.Name()), maxAge) {
			n++
		}
	}
	return n
}

// removeSpare removes the entry p of the spares' directory, under its
// lock, when RemoveSpares should, and says whether it did.
func removeSpare(p string, maxAge time.Duration) bool {
	held, err := lockDir(p, false)
	if err != nil {
		return false // in use (or not a directory mosaic made)
	}
	defer held.Close()
	fi, err := held.Stat()
	if err != nil {
		return false
	}
	if strings.HasPrefix(filepath.Base(p), ".") {
		return time.Since(fi.ModTime()) > time.Minute && os.RemoveAll(p) == nil
	}
	var s spare
	b, err := os.ReadFile(filepath.Join(p, spareRecord))
	gone := err != nil || json.Unmarshal(b, &s) != nil
	if !gone {
		_, err := os.Stat(s.Workspace)
		gone = err != nil || time.Since(s.Made) > maxAge
	}
	return gone && os.RemoveAll(p) == nil
}

// lockDir opens the directory p, no symlink, and takes its lock (flock,
// which a rename keeps: the lock is the inode's); without wait a lock
// held elsewhere is an error. It checks that p is still the directory it
// locked. Closing the file releases the lock.
func lockDir(p string, wait bool) (*os.File, error) {
	f, err := os.OpenFile(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	var locked, now unix.Stat_t
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	if unix.Fstat(int(f.Fd()), &locked) != nil || unix.Lstat(p, &now) != nil || locked.Dev != now.Dev || locked.Ino != now.Ino {
		f.Close()
		return nil, fmt.Errorf("%s: renamed while it was locked", p)
	}
	return f, nil
}

// testSpareStep, when a test sets it, is called at each step of making
// and taking a spare, with the directory it is in: a race with gc made
// deterministic.
var testSpareStep = func(step, dir string) {}

// resetSpare makes a spare just taken (TakeSpare, now at c.Dir) the copy
// Make would have cloned: it borrows the user's objects by their path
// now, and its refs are the repository's of this moment (its branches as
// origin's, its tags). Its HEAD is detached (MakeSpare checked it out so),
// so every branch may go, and Make's checkout of the base writes only
// what differs from the spare's commit.
func resetSpare(ctx context.Context, ws string, c units.Clone) error {
	alt := filepath.Join(c.Dir, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(c.Objects+"\n"), 0o600); err != nil {
		return err
	}
	// Its commit must be in the user's objects: git's checkout from a
	// HEAD it cannot read keeps the files of the index it has (a
	// repository made anew at the same path), where the base has none.
	// The three reads go at once.
	var headErr, theirsErr, oursErr error
	var theirs, ours string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, headErr = git(ctx, c.Dir, nil, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	}()
	go func() {
		defer wg.Done()
		theirs, theirsErr = git(ctx, ws, nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags")
	}()
	ours, oursErr = git(ctx, c.Dir, nil, "for-each-ref", "--format=%(refname)")
	wg.Wait()
	if headErr != nil {
		return fmt.Errorf("the spare's commit is not in %s: %w", c.Objects, headErr)
	}
	if theirsErr != nil {
		return theirsErr
	}
	if oursErr != nil {
		return oursErr
	}
	want := map[string]string{}
	for _, line := range strings.Split(theirs, "\n") {
		oid, ref, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
			ref = "refs/remotes/origin/" + b
		}
		want[ref] = oid
	}
	var in strings.Builder
	for _, ref := range strings.Split(ours, "\n") {
		if _, keep := want[ref]; ref != "" && !keep {
			in.WriteString("delete " + ref + "\n")
		}
	}
	for ref, oid := range want {
		in.WriteString("update " + ref + " " + oid + "\n")
	}
	_, err := gitIn(ctx, c.Dir, in.String(), "update-ref", "--no-deref", "--stdin")
	return err
}

// SpareStage is the stage name of the unit that makes a spare
// (units.SpareProperties): mosaic SpareStage STATE_ROOT WORKSPACE OBJECTS.
const SpareStage = "make-spare"

// SpareMain is that unit's program: it makes the spare and returns the
// exit code, saying on stderr (the unit's journal) why it could not.
func SpareMain(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mosaic "+SpareStage+" STATE_ROOT WORKSPACE OBJECTS")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), units.SpareTimeout)
	defer cancel()
	if err := MakeSpare(ctx, args[0], args[1], args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic: no spare copy of %s: %v\n", args[1], err)
		return 1
	}
	return 0
}

// settleIndex makes the index of a checkout just written trusted as it is:
// a file written in the same second as the index is "racily clean" to git
// (its time cannot tell it from a later change), and git hashes it again
// at every command until an index written later says otherwise. So, a
// second past the index's time, the index is refreshed once here, in the
// spare's unit, rather than at the start that takes the spare (10,000
// files: its checkout went from 294 ms to 68 ms).
func settleIndex(ctx context.Context, dir string) error {
	fi, err := os.Stat(filepath.Join(dir, ".git", "index"))
	if err != nil {
		return err
	}
	if wait := time.Until(fi.ModTime().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_, err = git(ctx, dir, nil, "update-index", "-q", "--refresh")
	return err
}
