package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"mosaic/sandbox"
)

// homeRounds are the runs of each named session the kept home's figures
// take, interleaved.
const homeRounds = 10

// Names of the kept home's figures.
const (
	homeEmptyRun = "run of a named session, empty kept home"
	homeFullRun  = "run of a named session, unchanged 150 MB kept home"
	homeLoad     = "load of the unchanged 150 MB home (init, before the command)"
	homeSave     = "save of the unchanged 150 MB home (init, after the command)"
	homeEmptyIO  = "load + save of the empty home"
)

// keptHome measures what a kept home costs a named session's start and
// end (issue 40: an unchanged 150 MB home at most 0.1 s more each): two
// named sessions, one whose home holds 150 files of 1 MB and 2,000 small
// ones, run in turn with /usr/bin/true; the init's own times of the load
// and the save are read from the session's home report.
func (b *bench) keptHome(r *Report) error {
	progress("kept home: %d runs each of a named session with an empty and a 150 MB home", homeRounds)
	names := []string{"mosaic-bench-home-empty", "mosaic-bench-home-full"}
	mosaic := func(args ...string) (string, error) {
		out, err := exec.Command(b.mosaic, args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("mosaic %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	fill := `mkdir -p ~/big ~/small; for i in $(seq 150); do head -c 1000000 /dev/urandom >~/big/f$i; done; for i in $(seq 2000); do echo $i >~/small/s$i; done`
	for i, name := range names {
		exec.Command(b.mosaic, "rm", "--force", name).Run()
		defer exec.Command(b.mosaic, "rm", "--force", name).Run()
		cmd := []string{"true"}
		if i == 1 {
			cmd = []string{"sh", "-c", fill}
		}
		if _, err := mosaic(append([]string{"run", "--direct", "--name", name, "--workspace", b.ws, "--"}, cmd...)...); err != nil {
			return err
		}
	}
	var runs [2][]float64
	var load, save, emptyIO []float64
	for round := 0; round < homeRounds; round++ {
		for i, name := range names {
			t := time.Now()
			if _, err := mosaic("run", "--direct", "--name", name, "--workspace", b.ws, "--", "/usr/bin/true"); err != nil {
				return err
			}
			runs[i] = append(runs[i], ms(time.Since(t)))
			rep, err := b.homeReport(name)
			if err != nil {
				return err
			}
			if i == 1 {
				load, save = append(load, rep.Load*1000), append(save, rep.Save*1000)
			} else {
				emptyIO = append(emptyIO, (rep.Load+rep.Save)*1000)
			}
		}
	}
	cmd := "mosaic run --direct --name NAME -- /usr/bin/true"
	r.Home = append(r.Home, summarise(homeEmptyRun, cmd, runs[0]), summarise(homeFullRun, cmd, runs[1]),
		summarise(homeEmptyIO, "home.json's load_seconds + save_seconds", emptyIO),
		summarise(homeLoad, "home.json's load_seconds", load), summarise(homeSave, "home.json's save_seconds", save))
	return nil
}

// homeReport reads the home report of the named session name.
func (b *bench) homeReport(name string) (sandbox.HomeReport, error) {
	out, err := exec.Command(b.mosaic, "home", name).Output()
	if err != nil {
		return sandbox.HomeReport{}, fmt.Errorf("mosaic home %s: %w", name, err)
	}
	state := filepath.Dir(strings.TrimSpace(string(out)))
	rep, ok := sandbox.ReadHomeReport(state)
	if !ok || rep.State != sandbox.HomeSaved {
		b, _ := json.Marshal(rep)
		return rep, fmt.Errorf("session %s's home was not saved: %s", name, b)
	}
	return rep, nil
}

// homeRatios are the kept home's targets (issue 40): an unchanged 150 MB
// home adds at most 0.1 s to the start (its load) and to the end (its
// save), against an empty one.
func homeRatios(r *Report) []Ratio {
	get := func(name string) float64 {
		for _, s := range r.Home {
			if s.Name == name {
				return s.MedianMs
			}
		}
		return -1
	}
	load, save, empty := get(homeLoad), get(homeSave), get(homeEmptyIO)
	if load < 0 || save < 0 || empty < 0 {
		return nil
	}
	return []Ratio{
		atMost("an unchanged 150 MB kept home: added to the start, its load (ms)", load-empty/2, 100, " ms"),
		atMost("an unchanged 150 MB kept home: added to the end, its save (ms)", save-empty/2, 100, " ms"),
	}
}
