// Package testhook is mosaic's one mechanism for test hooks: named points
// where a test makes a race deterministic (a pause), weakens mosaic to
// show that an attack test can fail (a flag), or watches a step (a
// function). A hook comes from one of two places, never a third:
//
//   - the environment (MOSAIC_TEST_*), read only by the binary the rig
//     tests build with -tags mosaic_testhooks (Enabled): in mosaic itself
//     Flag, Value, Wait and Pause are constant no-ops the compiler drops,
//     so no variable can pause or weaken a real mosaic;
//   - a function a package's own unit test sets (Set) for a point that
//     calls Call, in that test's process only.
package testhook

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Flag reports whether the environment variable env is "1" in a test
// build.
func Flag(env string) bool { return Enabled && os.Getenv(env) == "1" }

// Value is the environment variable env in a test build, else "".
func Value(env string) string {
	if !Enabled {
		return ""
	}
	return os.Getenv(env)
}

// Wait, when env names a FIFO (in a test build), waits until the test has
// opened it (so the test knows this point is reached), done what it does
// meanwhile, and closed it; it reports whether env named one.
func Wait(env string) bool {
	fifo := Value(env)
	if fifo == "" {
		return false
	}
	if f, err := os.Open(fifo); err == nil {
		_, _ = io.Copy(io.Discard, f)
		f.Close()
	}
	return true
}

// Pause is a crash point (in a test build): when MOSAIC_TEST_PAUSE_AT
// names stage, it creates MOSAIC_TEST_PAUSE_DIR/STAGE.reached and waits
// until MOSAIC_TEST_PAUSE_DIR/STAGE.go exists (at most a minute), so that
// a test can kill or race mosaic at an exact point.
func Pause(stage string) {
	if Value("MOSAIC_TEST_PAUSE_AT") != stage {
		return
	}
	dir := Value("MOSAIC_TEST_PAUSE_DIR")
	if dir == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, stage+".reached"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, stage+".go")); err == nil {
			return
		}
	}
}

var (
	mu  sync.Mutex
	set = map[string]func(string){}
)

// Call runs the function a unit test set for the point name, with arg; at
// every other time it does nothing.
func Call(name, arg string) {
	mu.Lock()
	fn := set[name]
	mu.Unlock()
	if fn != nil {
		fn(arg)
	}
}

// Set has Call(name, ...) run fn until the test t ends (t is a
// *testing.T: this package does not link package testing into mosaic).
func Set(t interface{ Cleanup(func()) }, name string, fn func(arg string)) {
	mu.Lock()
	set[name] = fn
	mu.Unlock()
	t.Cleanup(func() {
		mu.Lock()
		delete(set, name)
		mu.Unlock()
	})
}
