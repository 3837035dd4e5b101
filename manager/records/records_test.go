package records

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"mosaic/internal/acceptloop"
	"mosaic/sandbox"
	"mosaic/units"
)

// The session-ended stage's writer and parser agree: what EndedArgv writes,
// EndedMain reads back into end.json, with whether the egress proxy died
// (it started and its process is gone, killed here); and --drop, which units of a mosaic before issue 31 name,
// still removes their credential file.
func TestEndedStageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, Record{Name: "x", Description: Description{Command: []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(t.TempDir(), "mosaic", "credentials", "x", "env")
	if err := os.MkdirAll(filepath.Dir(cred), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cred, []byte("A=\"b\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	alive := filepath.Join(t.TempDir(), "proxy.alive")
	argv := units.EndedArgv("/bin/mosaic", dir, alive)
	if argv[0] != "/bin/mosaic" || argv[1] != sandbox.EndedStage {
		t.Fatalf("argv %v", argv)
	}
	env := map[string]string{"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "3"}
	// A proxy that never started (socket activation, no connection) did not die.
	EndedMain(append(argv[2:], "--drop", cred), func(k string) string { return env[k] })
	if e, ok := ReadEnd(dir); !ok || e.Result != "exit-code" || e.ExitCode != "exited" || e.ExitStatus != "3" || e.Ended.IsZero() || e.EgressDied {
		t.Errorf("end %+v, %v (no proxy ever started: want no egress_died)", e, ok)
	}
	// One that started and runs did not either; once it is gone, it died.
	holder := exec.Command(os.Args[0], "-test.run=^TestHoldAliveHelper$")
	holder.Env = append(os.Environ(), "MOSAIC_TEST_HOLD_ALIVE="+alive)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the helper did not mark alive: %v", err)
	}
	EndedMain(argv[2:], func(k string) string { return env[k] })
	if e, _ := ReadEnd(dir); e.EgressDied {
		t.Errorf("end %+v: the proxy runs, but egress_died", e)
	}
	holder.Process.Kill()
	holder.Wait()
	EndedMain(argv[2:], func(k string) string { return env[k] })
	if e, _ := ReadEnd(dir); !e.EgressDied {
		t.Errorf("end %+v: the proxy was killed, but no egress_died", e)
	}
	// A unit of a mosaic before socket activation names the socket, which a dial tries.
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	EndedMain([]string{"--state", dir, "--egress", sock}, func(k string) string { return env[k] })
	if e, _ := ReadEnd(dir); !e.EgressDied {
		t.Errorf("end %+v (no proxy answers: want egress_died)", e)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	EndedMain([]string{"--state", dir, "--egress", sock}, func(k string) string { return env[k] })
	if e, _ := ReadEnd(dir); e.EgressDied {
		t.Errorf("end %+v: the proxy answers, but egress_died", e)
	}
	if _, err := os.Stat(cred); !os.IsNotExist(err) {
		t.Errorf("the credential file is still there: %v", err)
	}
	if r, ok := Read(dir); !ok || r.Name != "x" {
		t.Errorf("record %+v, %v", r, ok)
	}
	// Without a record, the directory is not a session's: no end.json appears.
	other := t.TempDir()
	EndedMain(units.EndedArgv("/bin/mosaic", other, "")[2:], func(string) string { return "" })
	if _, ok := ReadEnd(other); ok {
		t.Error("end.json written where there is no session")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// A record written before Description named its injected credentials
// "credentials_injected" still says which they are.
func TestOldRecordInjected(t *testing.T) {
	dir := t.TempDir()
	old := `{"name":"x","command":["true"],"workspace":"/w","binds":null,"started":"2026-01-01T00:00:00Z","injected":{"KEY":["api.example.com:443"]}}`
	if err := os.WriteFile(filepath.Join(dir, recordFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ReadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Injected["KEY"]; len(got) != 1 || got[0] != "api.example.com:443" || r.OldInjected != nil {
		t.Errorf("injected %v (old %v): want KEY's host, moved into Description", r.Injected, r.OldInjected)
	}
}

// The end's reserve is 64 KiB of blocks the file system has given the file
// (fallocate: allocated, not written), kept as it is by the next start, and
// given up for end.json when the disk is full (WriteEnd).
func TestReserveEndAllocates(t *testing.T) {
	dir := t.TempDir()
	if err := ReserveEnd(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, reserveFile)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != reserveSize || st.Blocks*512 < reserveSize || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o777 != 0o600 {
		t.Fatalf("%s: size %d, %d bytes allocated, mode %o: want a 0600 file of %d bytes, all allocated", path, st.Size, st.Blocks*512, st.Mode, reserveSize)
	}
	b, _ := os.ReadFile(path)
	if len(b) != reserveSize || strings.Trim(string(b), "\x00") != "" {
		t.Fatalf("the reserve reads %d bytes, not all zero", len(b))
	}
	if err := ReserveEnd(dir); err != nil {
		t.Fatal(err)
	}
	var again unix.Stat_t
	if err := unix.Lstat(path, &again); err != nil || again.Ino != st.Ino || again.Mtim != st.Mtim {
		t.Errorf("a second start made the reserve again (%v)", err)
	}
}

// TestHoldAliveHelper is the process TestEndedStageRoundTrip kills: it
// marks MOSAIC_TEST_HOLD_ALIVE alive as a proxy does, says so, and waits.
func TestHoldAliveHelper(t *testing.T) {
	path := os.Getenv("MOSAIC_TEST_HOLD_ALIVE")
	if path == "" {
		t.Skip("run by TestEndedStageRoundTrip")
	}
	if err := acceptloop.HoldAlive(path); err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write([]byte("."))
	select {}
}
