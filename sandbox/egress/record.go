package egress

import (
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/regfile"
)

// What a proxy leaves of itself: a session's refusals and grants outlive
// it in its state directory (RecordDir), which `mosaic status` reads once
// the session has ended and `mosaic run` prints at its end. The proxy
// writes the file when it stops, and meanwhile every few seconds while
// something changed, so that a proxy killed outright leaves most of it.

// RecordFile is the proxy's record in its record directory.
const RecordFile = "egress.json"

// MaxRecorded bounds the refusals (the most recent) and grants a record
// keeps; the rest of the refusals are counted in RefusedOther.
const MaxRecorded = 50

// recordEvery is how often a running proxy writes its record when it changed.
const recordEvery = 2 * time.Second

// RecordDir is where the egress proxy of the session whose state directory
// is stateDir leaves its record: beside the session's home, where no
// session reaches (bwrap binds home and tmp alone; Landlock allows home).
func RecordDir(stateDir string) string { return filepath.Join(stateDir, "egress") }

// Record is the proxy's view as it last wrote it: the list, the grants
// made while it ran (expired and taken back too), and the refusals.
type Record struct {
	State
	Granted []Grant   `json:"granted"` // every grant made, in order, at most MaxRecorded
	Written time.Time `json:"written"`
	Final   bool      `json:"final"` // written as the proxy stopped
}

// record is the bounded record of the proxy now.
func (e *Egress) record(final bool) Record {
	st := e.State()
	if len(st.Refused) > MaxRecorded { // State sorts the latest first
		for _, r := range st.Refused[MaxRecorded:] {
			st.RefusedOther += r.Count
		}
		st.Refused = st.Refused[:MaxRecorded]
	}
	l := e.live
	l.mu.Lock()
	granted := append([]Grant{}, l.history...)
	l.mu.Unlock()
	return Record{State: st, Granted: granted, Written: time.Now(), Final: final}
}

// writeRecord writes the record into RecordDir (0600, atomically), if the
// proxy has one.
func (e *Egress) writeRecord(final bool) {
	if e.RecordDir == "" {
		return
	}
	b, _ := json.Marshal(e.record(final))
	tmp := filepath.Join(e.RecordDir, "."+RecordFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		e.logf("cannot write the session's egress record: %v", err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(e.RecordDir, RecordFile)); err != nil {
		e.logf("cannot write the session's egress record: %v", err)
	}
}

// catchStop catches SIGTERM (systemd's stop) and SIGINT for keepRecord,
// before the proxy says it is ready.
func catchStop() chan os.Signal {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, unix.SIGTERM, unix.SIGINT)
	return stop
}

// keepRecord writes the record every recordEvery while it changes from
// the count of changes seen (that of the record written last), and once
// more, final, when stop comes, then exits.
func (e *Egress) keepRecord(stop <-chan os.Signal, seen int64) {
	tick := time.NewTicker(recordEvery)
	for {
		select {
		case <-stop:
			e.writeRecord(true)
			os.Exit(0)
		case <-tick.C:
			if n := e.live.changes.Load(); n != seen {
				seen = n
				e.writeRecord(false)
			}
		}
	}
}

// maxRecordBytes bounds what is read of a record: MaxRecorded entries of
// at most a few KiB each.
const maxRecordBytes = 1 << 20

// ReadRecord reads the record a session's proxy left in dir (RecordDir).
func ReadRecord(dir string) (Record, bool) {
	b, err := regfile.Read(filepath.Join(dir, RecordFile), true, maxRecordBytes)
	if err != nil {
		return Record{}, false
	}
	var r Record
	if json.Unmarshal(b, &r) != nil {
		return Record{}, false
	}
	sort.Slice(r.Refused, func(i, j int) bool { return r.Refused[i].Last.After(r.Refused[j].Last) })
	return r, true
}

// WaitRecord reads the record in dir once its proxy wrote it final, or the
// last one it wrote when that does not come within wait.
func WaitRecord(dir string, wait time.Duration) (Record, bool) {
	deadline := time.Now().Add(wait)
	if _, err := os.Lstat(filepath.Join(dir, RecordFile)); errors.Is(err, os.ErrNotExist) {
		// None at all: its proxy never served a connection (it writes
		// one first), for it never started (socket activation).
		return Record{}, false
	}
	for {
		r, ok := ReadRecord(dir)
		if (ok && r.Final) || !time.Now().Before(deadline) {
			return r, ok
		}
		time.Sleep(5 * time.Millisecond)
	}
}
