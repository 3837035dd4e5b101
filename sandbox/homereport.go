package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// HomeFDEnv names the descriptor of the session's state directory, which
// the init loads the home from and saves it to.
const HomeFDEnv = "MOSAIC_HOME_FD"

// ScopeHomeFD is that descriptor in a scope's bwrap (see ScopeInfoFD).
const ScopeHomeFD = 6

// The names in the state directory the load and the save use.
const (
	HomeDirName    = "home"         // the kept home
	HomeSaving     = ".home-saving" // the save being written, then the old home being removed
	HomeReportName = "home.json"    // HomeReport
)

// Home states, HomeReport.State.
const (
	HomeRunning   = "running"   // loaded; the session has not ended (or was killed before it could save)
	HomeInSave    = "saving"    // the command has ended and the init saves (or was killed while it did)
	HomeSaved     = "saved"     // saved back to the kept home
	HomeDiscarded = "discarded" // not kept (a run without --name): nothing saved
	HomeNotSaved  = "not-saved" // the save failed (Error says why); the kept home is as it was
)

// HomeReport is what the init says of a session's home, in its state
// directory.
type HomeReport struct {
	State   string    `json:"state"`
	Size    uint64    `json:"size,omitempty"`     // the home's bound, bytes
	Full    bool      `json:"full,omitempty"`     // the home was at its bound when the command ended
	TmpFull bool      `json:"tmp_full,omitempty"` // so was /tmp
	Saved   CopyStats `json:"saved,omitempty"`
	// Load and Save are how long the load into the tmpfs and the save
	// back took, in seconds (make bench's kept-home rows read them).
	Load  float64   `json:"load_seconds,omitempty"`
	Save  float64   `json:"save_seconds,omitempty"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// ReadHomeReport reads the report in a session's state directory; false
// when there is none (the session never loaded its home).
func ReadHomeReport(stateDir string) (HomeReport, bool) {
	var r HomeReport
	b, err := os.ReadFile(stateDir + "/" + HomeReportName)
	if err != nil || len(b) > 64<<10 || json.Unmarshal(b, &r) != nil {
		return r, false
	}
	return r, true
}

// OpenHomeStore opens a session's state directory for the init
// (HomeFDEnv), following no symlink on the way. The descriptor is
// close-on-exec: the caller hands it on explicitly.
func OpenHomeStore(stateDir string) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, stateDir, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot open the session's state %s for its home: %w", stateDir, err)
	}
	return os.NewFile(uintptr(fd), stateDir), nil
}

// SizeText is a size as a person reads it: "2 GiB", "512 MiB".
func SizeText(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}

// CopyStats counts what a copy of a home copied and skipped.
type CopyStats struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Unchanged counts the files (of Files; their bytes are in Bytes) a
	// save linked from the previous home instead of writing them.
	Unchanged int            `json:"unchanged,omitempty"`
	Skipped   map[string]int `json:"skipped,omitempty"` // by why: fifo, socket, device, too-large, too-deep, too-many, mount-point
}

// Skip counts an entry left out, and why.
func (s *CopyStats) Skip(why string) {
	if s.Skipped == nil {
		s.Skipped = map[string]int{}
	}
	s.Skipped[why]++
}
