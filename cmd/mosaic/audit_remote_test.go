package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"mosaic/internal/journald"
)

// TestAuditShippedToJournalRemote (issue 41): a session's audit events
// reach a collecting host with journald's own tools, no agent of mosaic's.
// A real systemd-journal-remote listens on loopback (on a socket the test
// bound, so no port is guessed), a session is granted a host, a real
// systemd-journal-upload sends the rig user's journal to it, and the
// received journal holds the grant, found as docs/policy.md's "Shipping
// the audit" finds it (its MESSAGE_ID and the session), with the trusted
// _SYSTEMD_USER_UNIT of the proxy that wrote it kept.
//
// Checked to bite: with the upload pointed at another loopback port (where
// nothing listens), systemd-journal-upload fails and, with that error
// ignored, the received journal has no grant and the test fails on it.
func TestAuditShippedToJournalRemote(t *testing.T) {
	needRig(t)
	remoteBin, uploadBin := "/lib/systemd/systemd-journal-remote", "/lib/systemd/systemd-journal-upload"
	for _, b := range []string{remoteBin, uploadBin} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s is missing (contrib/install-deps.sh installs systemd-journal-remote): %v", b, err)
		}
	}
	ws := workspace(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", ws, "--allow-host", "example.com", "--", "sleep", "60")
	mustMosaic(t, "allow", name, "example.org")
	egressUnit := "mosaic-" + name + "-egress.service"
	eventually(t, 10*time.Second, "the grant in the local journal", func() bool {
		return len(journalEvents(t, "MESSAGE_ID="+journald.EgressGrant, "MOSAIC_SESSION="+name, "_SYSTEMD_USER_UNIT="+egressUnit)) == 1
	})

	received := filepath.Join(t.TempDir(), "remote.journal")
	stop := startJournalRemote(t, remoteBin, received)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	upload := exec.CommandContext(ctx, uploadBin, "--user", "--follow=no", "--url=http://"+stop.addr)
	if out, err := upload.CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-upload: %v\n%s", err, out)
	}
	stop.wait(t)

	out, err := exec.Command("journalctl", "--file="+received, "--no-pager", "-q", "-o", "json",
		"MESSAGE_ID="+journald.EgressGrant, "MOSAIC_SESSION="+name).Output()
	if err != nil {
		t.Fatalf("journalctl --file on the received journal: %v", err)
	}
	var grants []map[string]any
	for _, e := range parseJournalJSON(string(out)) {
		if e["MOSAIC_ENTRY"] == "example.org:443" {
			grants = append(grants, e)
		}
	}
	if len(grants) != 1 || grants[0]["_SYSTEMD_USER_UNIT"] != egressUnit || grants[0]["SYSLOG_IDENTIFIER"] != journald.Identifier ||
		!strings.Contains(str(grants[0]["MOSAIC_BY"]), "uid ") {
		t.Errorf("the received journal's grants of %s: %v, want one of example.org written by %s", name, grants, egressUnit)
	}
	mustMosaic(t, "stop", "--timeout", "1s", name)
}

// journalRemote is a running systemd-journal-remote: its address and how
// to stop it.
type journalRemote struct {
	addr string
	cmd  *exec.Cmd
}

// startJournalRemote starts systemd-journal-remote receiving over HTTP on
// a loopback socket the test binds (passed as its fd 3, socket-activation
// style, so no port is guessed and none is raced for), writing everything into the journal file out.
func startJournalRemote(t *testing.T, bin, out string) *journalRemote {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// It takes fd 3 only as one of sd_listen_fds(): LISTEN_PID must be its
	// own pid, which the shell it is exec'd from has.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, bin, "--listen-http=-3", "--split-mode=none", "--output="+out)
	cmd.ExtraFiles = []*os.File{f}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("systemd-journal-remote: %v", err)
	}
	r := &journalRemote{addr: ln.Addr().String(), cmd: cmd}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		t.Logf("systemd-journal-remote's output:\n%s", log.String())
	})
	return r
}

// wait stops the receiver (SIGTERM) so that its journal file is complete
// and closed before it is read.
func (r *journalRemote) wait(t *testing.T) {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("systemd-journal-remote: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("systemd-journal-remote did not stop on SIGTERM")
	}
}
