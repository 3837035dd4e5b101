package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/manager/request"
)

// pending is a Connecting whose connection comes when the test says.
func pending() (c *Connecting, arrive func(*Manager, error)) {
	c = &Connecting{done: make(chan struct{})}
	return c, func(m *Manager, err error) {
		c.m, c.err = m, err
		close(c.done)
	}
}

// A scope run waits for the connection only where it must, and a Ctrl-C
// meanwhile ends the wait at once as interrupted (not the connection's
// error, which may come only after the dial's timeout); a SIGWINCH does
// not interrupt.
func TestUntilConnectedInterrupted(t *testing.T) {
	c, arrive := pending()
	defer arrive(nil, errors.New("never connected"))
	signals := make(chan os.Signal, 2)
	signals <- unix.SIGWINCH
	signals <- unix.SIGINT
	_, err := untilConnected(context.Background(), c, signals, "s")
	if !errors.Is(err, errcode.Interrupted.Target()) {
		t.Errorf("untilConnected: %v, want interrupted", err)
	}
}

// The connection's Manager is whole when a caller has it, and its first
// caller sweeps the credential files no running unit owns; a connection
// that failed says why to every caller.
func TestConnectingSweepsOnce(t *testing.T) {
	h := testHost(t)
	stale := filepath.Join(h.Paths.RuntimeDir, "mosaic", "credentials", "gone", "env")
	if err := os.MkdirAll(filepath.Dir(stale), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("A=b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, arrive := pending()
	m := fakeManager(t, &fakeSystemd{})
	m.paths = h.Paths
	go func() {
		time.Sleep(10 * time.Millisecond)
		arrive(m, nil)
	}()
	got, err := c.Manager(context.Background())
	if err != nil || got != m {
		t.Fatalf("Manager = %v, %v", got, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale credential file is still there: %v", err)
	}

	failed, arriveErr := pending()
	arriveErr(nil, errcode.NoUserManager.New("no manager"))
	for i := 0; i < 2; i++ {
		if _, err := failed.Manager(context.Background()); !errors.Is(err, errcode.NoUserManager.Target()) {
			t.Errorf("call %d: %v, want the connection's error", i, err)
		}
	}
}

// RunScope is for a scope's plan only: a service's is mosaic's own bug,
// with a code of its own, and nothing is started.
func TestRunScopeOfAServiceIsABug(t *testing.T) {
	h := testHost(t)
	plan := testPlan(t, h, request.Request{Name: "svc"})
	c, arrive := pending()
	arrive(fakeManager(t, &fakeSystemd{}), nil)
	_, err := c.RunScope(context.Background(), plan, [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, make(chan os.Signal))
	if !errors.Is(err, errcode.Bug.Target()) {
		t.Errorf("RunScope of a service: %v, want bug", err)
	}
}

// A scope's plan names the scope its init must be in, and a made-up name
// made up again names the new one.
func TestScopePromiseFollowsTheName(t *testing.T) {
	h := testHost(t)
	plan := testPlan(t, h, request.Request{Scope: true, Mode: request.ModeDirect})
	if plan.Spec.Promise.Scope != "/mosaic.slice/mosaic-"+plan.Spec.Name+".scope" {
		t.Fatalf("promise scope %q", plan.Spec.Promise.Scope)
	}
	spec := renamed(plan.Spec)
	if spec.Promise.Scope != "/mosaic.slice/mosaic-"+spec.Name+".scope" || spec.Name == plan.Spec.Name {
		t.Errorf("renamed %s to %s: promise scope %q", plan.Spec.Name, spec.Name, spec.Promise.Scope)
	}
	if len(spec.BindIDs) != len(plan.Spec.BindIDs) || len(spec.Protect) != len(plan.Spec.Protect) {
		t.Errorf("the rename changed the binds: %d ids and %d protected, were %d and %d", len(spec.BindIDs), len(spec.Protect), len(plan.Spec.BindIDs), len(plan.Spec.Protect))
	}
}
