//go:build !amd64

package syscallprobe

var archProbes []Probe
