package units

import (
	"strconv"
	"strings"
	"time"

	"mosaic/internal/errcode"
)

// ParseSize reads a byte size as systemd and docker write it: a number with
// an optional K, M, G, T or P suffix (powers of 1024, as systemd's MemoryMax=
// takes them), itself optionally followed by B or iB: "512M", "2G", "4GB",
// "4GiB", "1.5G".
func ParseSize(flag, s string) (uint64, error) {
	if strings.TrimSpace(s) == "infinity" {
		return Infinity, nil
	}
	bad := errcode.BadLimit.New("--%s %q is not a size: use a number of bytes with an optional K, M, G or T suffix, e.g. 2G, 512M or 4GB", flag, s)
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := uint64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGTP", t[n-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	// !(v > 0) also refuses NaN, which ParseFloat reads from "nan".
	if err != nil || !(v > 0) || v*float64(mult) >= 1<<63 || strings.ContainsAny(t, "eExXpP+-") {
		return 0, bad
	}
	n := uint64(v * float64(mult))
	if n == 0 {
		return 0, bad
	}
	return n, nil
}

// ParseCount reads a positive whole number.
func ParseCount(flag, s string) (uint64, error) {
	if strings.TrimSpace(s) == "infinity" {
		return Infinity, nil
	}
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || v == 0 {
		return 0, errcode.BadLimit.New("--%s %q is not a positive whole number", flag, s)
	}
	return v, nil
}

// ParsePercent reads a CPU quota such as "50%" or "200%" (two CPUs).
func ParsePercent(flag, s string) (uint64, error) {
	if strings.TrimSpace(s) == "infinity" {
		return Infinity, nil
	}
	t, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseUint(t, 10, 64)
	if !ok || err != nil || v == 0 || v > 100000 {
		return 0, errcode.BadLimit.New("--%s %q is not a CPU quota: use a percentage of one CPU, e.g. 50%% or 200%%", flag, s)
	}
	return v, nil
}

// durationUnits are the units of systemd's time spans (systemd.time(7)).
var durationUnits = map[string]time.Duration{
	"us": time.Microsecond, "usec": time.Microsecond, "µs": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseDuration reads a positive time span as systemd's *Sec= settings take
// it: plain seconds ("90"), or numbers with units, spaced or not ("90s",
// "1min 30s", "1h30m", "2h", "1.5h"). What systemd would round to nothing
// (under a microsecond) is refused rather than turned into 0, which systemd
// reads as "no limit" or "at once".
func ParseDuration(flag, s string) (time.Duration, error) {
	d, err := parseSpan(s)
	if err != nil || d < time.Microsecond {
		return 0, errcode.BadDuration.New("--%s %q is not a duration: use seconds (90) or a span such as 90s, 1min 30s or 2h", flag, s)
	}
	// systemd counts in microseconds: less would become 0, which for
	// RuntimeMaxUSec means at once rather than never.
	if d < time.Microsecond {
		return 0, errcode.BadDuration.New("--%s %q is shorter than a microsecond, the finest systemd counts: use e.g. 90s, 30m or 2h", flag, s)
	}
	return d, nil
}

// ParseTimeout is ParseDuration that also takes 0: at once.
func ParseTimeout(flag, s string) (time.Duration, error) {
	if d, err := parseSpan(s); err == nil && d == 0 {
		return 0, nil
	}
	return ParseDuration(flag, s)
}

func parseSpan(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, strconv.ErrSyntax
	}
	if v, err := strconv.ParseFloat(t, 64); err == nil && !strings.ContainsAny(t, "eExXpPnNiI+-") {
		return time.Duration(v * float64(time.Second)), nil
	}
	var total float64
	for t != "" {
		t = strings.TrimLeft(t, " ")
		i := 0
		for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
			i++
		}
		num := t[:i]
		t = strings.TrimLeft(t[i:], " ")
		j := 0
		for j < len(t) && (t[j] < '0' || t[j] > '9') && t[j] != ' ' && t[j] != '.' {
			j++
		}
		unit := t[:j]
		t = t[j:]
		v, err := strconv.ParseFloat(num, 64)
		mult, ok := durationUnits[unit]
		if err != nil || !ok {
			return 0, strconv.ErrSyntax
		}
		total += v * float64(mult)
		if total > float64(100*365*24*time.Hour) {
			return 0, strconv.ErrRange
		}
	}
	return time.Duration(total), nil
}

// LimitStrings are the limits as a user writes them ("" for none): the
// flags of mosaic start and the fields of a bus launch.
type LimitStrings struct {
	MemoryMax  string `json:"memory_max,omitempty"`
	TasksMax   string `json:"tasks_max,omitempty"`
	CPUQuota   string `json:"cpu_quota,omitempty"`
	RuntimeMax string `json:"runtime_max,omitempty"`
	TmpSize    string `json:"tmp_size,omitempty"`
	HomeSize   string `json:"home_size,omitempty"`
}

// Parse reads every limit given, naming the flag of the first that is wrong.
func (l LimitStrings) Parse() (Limits, error) {
	var out Limits
	var err error
	if l.MemoryMax != "" {
		if out.MemoryMax, err = ParseSize("memory-max", l.MemoryMax); err != nil {
			return out, err
		}
	}
	if l.TasksMax != "" {
		if out.TasksMax, err = ParseCount("tasks-max", l.TasksMax); err != nil {
			return out, err
		}
	}
	if l.CPUQuota != "" {
		if out.CPUQuota, err = ParsePercent("cpu-quota", l.CPUQuota); err != nil {
			return out, err
		}
	}
	if l.RuntimeMax != "" {
		if out.RuntimeMax, err = ParseDuration("runtime-max", l.RuntimeMax); err != nil {
			return out, err
		}
	}
	if l.TmpSize != "" {
		if out.TmpSize, err = ParseSize("tmp-size", l.TmpSize); err != nil {
			return out, err
		}
	}
	if l.HomeSize != "" {
		if out.HomeSize, err = ParseSize("home-size", l.HomeSize); err != nil {
			return out, err
		}
	}
	return out, nil
}
