package records

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"mosaic/internal/regfile"
	"mosaic/manager/clone/patchcheck"
)

// Clone is clone.json, beside session.json in a clone-mode session's state
// directory: where its copy started, what its finish step last found (as
// mosaic read it: the summary is mosaic's own reading of the patch), and
// what became of the change. Only mosaic writes it; the session never sees
// its state directory.
type Clone struct {
	Base   string `json:"base"`          // the commit the copy started from
	Parent string `json:"parent"`        // the user's commit under Base
	Ref    string `json:"ref,omitempty"` // --base, as given
	// Kind is units.ClonePlain for a plain directory's copy.
	Kind string `json:"kind,omitempty"`
	// Subs are the submodules the copy has as repositories of their own
	// (units.CloneSub's fields), for the finish step.
	Subs []Submodule `json:"subs,omitempty"`
	// Snapshot is when the finish step last ran; nil before it ever did.
	Snapshot *time.Time          `json:"snapshot,omitempty"`
	Head     string              `json:"head,omitempty"` // the snapshot's commit
	Summary  *patchcheck.Summary `json:"summary,omitempty"`
	// Refused says why apply would refuse the change ("" when it would not).
	Refused string `json:"refused,omitempty"`
	// PatchBytes is the size of a patch over apply's bound (0 when it is
	// not): apply --branch takes such a change, apply refuses it.
	PatchBytes int64 `json:"patch_bytes,omitempty"`
	// Applied is how the change went into the checkout: "worktree", or
	// "branch NAME"; Discarded that it was thrown away.
	Applied   string `json:"applied,omitempty"`
	Discarded bool   `json:"discarded,omitempty"`
	// Shown names the change mosaic diff last showed
	// (patchcheck.ShownKey): apply refuses another.
	Shown string `json:"shown,omitempty"`
	// DoneBy and DoneAt say who applied or discarded it, and when.
	DoneBy string     `json:"done_by,omitempty"`
	DoneAt *time.Time `json:"done_at,omitempty"`
}

// Submodule is one submodule of a copy: its path, its git directory's
// name under .git/modules, the user's objects it borrows, the commit its
// copy started from.
type Submodule struct {
	Path    string `json:"path"`
	Module  string `json:"module"`
	Objects string `json:"objects"`
	Base    string `json:"base"`
}

// CloneFile is clone.json's name.
const CloneFile = "clone.json"

// Pending reports whether the change may hold work the user has not taken
// or thrown away: one never snapshotted counts.
func (c Clone) Pending() bool {
	if c.Applied != "" || c.Discarded {
		return false
	}
	return c.Summary == nil || len(c.Summary.Files) > 0
}

// Line says the change in a few words: "5 files, +120 -30, not applied".
func (c Clone) Line() string {
	switch {
	case c.Discarded:
		return "discarded"
	case c.Summary == nil:
		return "not snapshotted yet (mosaic diff takes it)"
	case len(c.Summary.Files) == 0:
		return "no change"
	}
	state := "not applied"
	if c.Applied != "" {
		state = "applied (" + c.Applied + ")"
	} else if c.PatchBytes > 0 {
		state = fmt.Sprintf("%d MB, over apply's bound: not applied (mosaic apply --branch takes it)", (c.PatchBytes+1<<20-1)>>20)
	} else if c.Refused != "" {
		state = "refused by apply"
	}
	return fmt.Sprintf("%s, %s", c.Summary.Line(), state)
}

// WriteClone writes clone.json into a session's state directory.
func WriteClone(dir string, c Clone) error {
	return WriteJSONAtomic(filepath.Join(dir, CloneFile), c)
}

// ReadClone reads clone.json; false for a session that is not in clone mode.
func ReadClone(dir string) (*Clone, bool) {
	b, err := regfile.Read(filepath.Join(dir, CloneFile), true, maxRecord)
	if err != nil {
		return nil, false
	}
	var c Clone
	if json.Unmarshal(b, &c) != nil {
		return nil, false
	}
	return &c, true
}
