package manager

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units"
)

// The finish step is planned as every session is (newPlan): a host whose
// stage binary may not be used refuses it before anything starts, as it
// refuses the session's own start, rather than start a unit whose exec
// shim is missing or of another build. (finishSpec, before, made its spec
// around request.Prepare and skipped the check.)
func TestFinishPlanChecksTheStage(t *testing.T) {
	fx := newChangeFixture(t)
	dir := fx.h.Paths.SessionDir("c")
	rec, err := records.ReadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := records.ReadClone(dir)
	h := fx.h
	h.StageErr = errcode.StageMissing.New("no mosaic-stage beside %s", h.MosaicBin)
	fx.m.host = &h
	if _, err := fx.m.finishPlan("c", rec, *cl, fx.h.Paths); !errors.Is(err, errcode.StageMissing.Target()) {
		t.Errorf("finish step planned without a stage binary: %v, want stage-missing", err)
	}
}

// A start changes nothing of the plan it is given: a clone's copy is made
// in the start's own copy of the plan (its Clone too: the plan's is
// shared), and the handles it holds (the credentials' file) are its
// launch's. (A made-up name's rename: TestStartRenamesAMadeUpNameThatIsTaken.)
func TestStartLeavesThePlan(t *testing.T) {
	h := testHost(t)
	t.Setenv("MY_TOKEN", "s3cret")
	plan := testPlan(t, h, request.Request{Name: "keep", Credentials: []string{"MY_TOKEN"}, Mode: request.ModeClone, Workspace: gitRepo(t, h)})
	before := units.Render(plan.Spec, units.Launch{}, units.FeaturesFor(257))
	m := fakeManager(t, &fakeSystemd{})
	l, err := m.start(context.Background(), plan, units.Launch{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if l.launch.CredentialFile == "" || l.spec.Clone.Base == "" {
		t.Fatalf("started %s (credentials %q, copy of %q): want held credentials, a copy made", l.spec.Name, l.launch.CredentialFile, l.spec.Clone.Base)
	}
	after := units.Render(plan.Spec, units.Launch{}, units.FeaturesFor(257))
	if b, a := fmt.Sprint(before), fmt.Sprint(after); plan.Spec.Clone.Base != "" || a != b {
		t.Errorf("the start changed the plan it was given:\n%s\n%s", b, a)
	}
}
