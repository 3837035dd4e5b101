package units

import (
	"strconv"
	"strings"
	"time"

	"mosaic/units/errcode"
)

// ParseSize reads a byte size as systemd writes it: a number with an optional
// K, M, G or T suffix (powers of 1024), e.g. "512M" or "2G".
func ParseSize(flag, s string) (uint64, error) {
	mult := uint64(1)
	t := strings.TrimSpace(s)
	if n := len(t); n > 0 {
		switch strings.ToUpper(t[n-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v == 0 || v > (1<<63)/mult {
		return 0, errcode.BadLimit.New("--%s %q is not a size: use a positive number of bytes with an optional K, M, G or T suffix, e.g. 2G", flag, s)
	}
	return v * mult, nil
}

// ParseCount reads a positive whole number.
func ParseCount(flag, s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || v == 0 {
		return 0, errcode.BadLimit.New("--%s %q is not a positive whole number", flag, s)
	}
	return v, nil
}

// ParsePercent reads a CPU quota such as "50%" or "200%" (two CPUs).
func ParsePercent(flag, s string) (uint64, error) {
	t, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseUint(t, 10, 64)
	if !ok || err != nil || v == 0 || v > 100000 {
		return 0, errcode.BadLimit.New("--%s %q is not a CPU quota: use a percentage of one CPU, e.g. 50%% or 200%%", flag, s)
	}
	return v, nil
}

// ParseDuration reads a positive Go duration such as "90s", "30m" or "2h".
func ParseDuration(flag, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, errcode.BadDuration.New("--%s %q is not a duration: use e.g. 90s, 30m or 2h", flag, s)
	}
	// systemd counts in microseconds: less would become 0, which for
	// RuntimeMaxUSec means at once rather than never.
	if d < time.Microsecond {
		return 0, errcode.BadDuration.New("--%s %q is shorter than a microsecond, the finest systemd counts: use e.g. 90s, 30m or 2h", flag, s)
	}
	return d, nil
}

// LimitStrings are the limits as a user writes them ("" for none): the
// flags of mosaic start and the fields of a bus launch.
type LimitStrings struct {
	MemoryMax  string `json:"memory_max,omitempty"`
	TasksMax   string `json:"tasks_max,omitempty"`
	CPUQuota   string `json:"cpu_quota,omitempty"`
	RuntimeMax string `json:"runtime_max,omitempty"`
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
	return out, nil
}
