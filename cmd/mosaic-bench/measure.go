package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"mosaic/manager"
)

// Stat is one measured figure: a command run N times, in milliseconds.
type Stat struct {
	Name    string  `json:"name"`
	Command string  `json:"command"`
	N       int     `json:"n"`
	MeanMs  float64 `json:"mean_ms"`
	// MedianMs is what a loaded machine's outliers move least.
	MedianMs float64 `json:"median_ms,omitempty"`
	StdMs    float64 `json:"stddev_ms"`
	MinMs    float64 `json:"min_ms"`
	MaxMs    float64 `json:"max_ms"`
	Note     string  `json:"note,omitempty"`
}

// Ratio compares two figures of the same run against a target.
type Ratio struct {
	What   string  `json:"what"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
	// Missed says by how much a target was missed ("14% over").
	Missed string `json:"missed,omitempty"`
}

// atMost is a ratio whose target is at most limit.
func atMost(what string, value, limit float64, unit string) Ratio {
	r := Ratio{What: what, Value: value, Target: fmt.Sprintf("≤ %g%s", limit, unit), Met: value <= limit}
	if !r.Met {
		r.Missed = fmt.Sprintf("%.0f%% over", (value/limit-1)*100)
	}
	return r
}

// atLeast is a ratio whose target is at least limit.
func atLeast(what string, value, limit float64) Ratio {
	r := Ratio{What: what, Value: value, Target: fmt.Sprintf("≥ %g", limit), Met: value >= limit}
	if !r.Met {
		r.Missed = fmt.Sprintf("%.0f%% under", (1-value/limit)*100)
	}
	return r
}

// MessageCount is the D-Bus messages one command's connection sent and
// received (MOSAIC_TRACE=1's last line), per start for a batch.
type MessageCount struct {
	What string `json:"what"`
	manager.Messages
}

// Report is everything one run measured.
type Report struct {
	Machine map[string]string `json:"machine"`
	Date    time.Time         `json:"date"`
	OneShot []Stat            `json:"one_shot"`
	// Spaced are the one-shot figures the targets compare, measured one at
	// a time: interleaved, each run after a pause.
	Spaced      []Stat             `json:"one_shot_spaced,omitempty"`
	Start       []Stat             `json:"start_latency"`
	Concurrency []Stat             `json:"concurrency"`
	Footprint   map[string]float64 `json:"footprint_mib"`
	Breakdown   []Stat             `json:"run_breakdown"`
	Egress      []Stat             `json:"egress_ttfb,omitempty"`
	// Device is the session's way out (the network device, the proxy)
	// against the host's: a download and new connections.
	Device []Stat `json:"network_device,omitempty"`
	// ScopeBreakdown is MOSAIC_TRACE's steps of mosaic run --scope.
	ScopeBreakdown []Stat `json:"scope_breakdown,omitempty"`
	// Hardening is what each hardening step costs on its own.
	Hardening []Stat `json:"hardening,omitempty"`
	// Home is a kept home's load and save, empty and 150 MB unchanged.
	Home []Stat `json:"kept_home,omitempty"`
	// Clone is clone mode against direct mode and by hand.
	Clone []Stat `json:"clone_mode,omitempty"`
	// Messages are the D-Bus messages of a run, a scope run and a start.
	Messages []MessageCount `json:"dbus_messages,omitempty"`
	// Processes are the programs a run, a scope run and their peers start.
	Processes []ProcessCount `json:"process_starts,omitempty"`
	Ratios    []Ratio        `json:"ratios"`
	Notes     []string       `json:"notes,omitempty"`
}

// measure runs f n times after one warm-up and summarises the durations.
func measure(name, command string, n int, f func() error) (Stat, error) {
	if err := f(); err != nil {
		return Stat{Name: name, Command: command}, err
	}
	ds := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := f(); err != nil {
			return Stat{Name: name, Command: command}, err
		}
		ds = append(ds, ms(time.Since(t)))
	}
	return summarise(name, command, ds), nil
}

func summarise(name, command string, ds []float64) Stat {
	s := Stat{Name: name, Command: command, N: len(ds)}
	if len(ds) == 0 {
		return s
	}
	sort.Float64s(ds)
	sum := 0.0
	for _, d := range ds {
		sum += d
	}
	s.MeanMs = sum / float64(len(ds))
	for _, d := range ds {
		s.StdMs += (d - s.MeanMs) * (d - s.MeanMs)
	}
	s.StdMs = math.Sqrt(s.StdMs / float64(len(ds)))
	s.MinMs, s.MaxMs = ds[0], ds[len(ds)-1]
	s.MedianMs = ds[len(ds)/2]
	if len(ds)%2 == 0 {
		s.MedianMs = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// runCmd runs argv quietly and returns its error with stderr.
func runCmd(argv []string, env ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func output(argv ...string) string {
	out, _ := exec.Command(argv[0], argv[1:]...).Output()
	return strings.TrimSpace(string(out))
}

func machine() map[string]string {
	m := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "kernel": output("uname", "-r"),
		"systemd": output("systemctl", "--user", "show", "-P", "Version"), "bwrap": output("bwrap", "--version")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m["cpu"] = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	// The load when the run began: other work on the machine stretches
	// every wall-clock figure, the ratios less.
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m["load average at start (1, 5, 15 min)"] = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m["memory"] = strings.Join(strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:], " ")
	}
	return m
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mosaic-bench: "+format+"\n", args...)
}
