package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// deviceMB is the download the network device's throughput is measured
// with (issue 39: 200 MB).
const deviceMB = 200

// deviceRounds are the downloads and the small requests each way of
// reaching the server makes.
const deviceRounds, deviceConnects = 5, 50

// Names of the network device's figures.
const (
	devDirect      = "download, direct on the host"
	devProxyAware  = "download in a session, proxy-aware client (CONNECT)"
	devDevice      = "download in a session, client ignoring the proxy (network device)"
	connDirect     = "new connection + first byte, direct on the host"
	connDevice     = "new connection + first byte in a session (network device)"
	connProxyAware = "new connection + first byte in a session, proxy-aware client"
)

// networkDevice measures the session's way out against the host's own, on
// the rig's test network side (mockhost.mosaic.test, an address of this
// machine, which the tests' /etc/hosts names): a 200 MB download by curl,
// direct, through the proxy as a proxy-aware client, and through the
// network device as a client that ignores the proxy; and the time to a
// new connection's first byte each way. The downloads inside run in one
// session, so that its start is not counted. Skipped (a note) without the
// rig's test network.
func (b *bench) networkDevice(r *Report) error {
	n := os.Getenv("MOSAIC_TESTNET")
	if n == "" {
		r.Notes = append(r.Notes, "network device: not measured (no MOSAIC_TESTNET: run make bench, which makes the rig's test network)")
		return nil
	}
	progress("network device: a %d MB download and %d new connections each way", deviceMB, deviceConnects)
	l, err := net.Listen("tcp", n+".1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	blob := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/small" {
			io.WriteString(w, "ok\n")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(deviceMB<<20))
		for i := 0; i < deviceMB; i++ {
			if _, err := w.Write(blob); err != nil {
				return
			}
		}
	})}
	go srv.Serve(l)
	defer srv.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	base := "http://mockhost.mosaic.test:" + port
	script := fmt.Sprintf(`
for i in $(seq %[1]d); do curl -s -o /dev/null -w "%%{time_total}\n" "$@" %[2]s/big; done
echo --
for i in $(seq %[3]d); do curl -s -o /dev/null -w "%%{time_starttransfer}\n" "$@" %[2]s/small; done
`, deviceRounds, base, deviceConnects)
	run := func(argv ...string) ([]float64, []float64, error) {
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
		big, small, _ := strings.Cut(string(out), "--\n")
		return seconds(big), seconds(small), nil
	}
	session := []string{b.mosaic, "run", "--direct", "--workspace", b.ws, "--allow-host", "mockhost.mosaic.test:" + port, "--allow-host", n + ".0/24", "--", "bash", "-c", script, "bash"}
	dBig, dSmall, err := run("bash", "-c", script, "bash", "--noproxy", "*")
	if err != nil {
		return err
	}
	tBig, tSmall, err := run(append(session, "--noproxy", "*")...)
	if err != nil {
		return err
	}
	pBig, pSmall, err := run(append(session, "-p")...) // --proxytunnel: a CONNECT through HTTPS_PROXY's relay
	if err != nil {
		return err
	}
	cmd := "curl " + base + "/big"
	r.Device = append(r.Device, summarise(devDirect, cmd, dBig), summarise(devProxyAware, "curl -p "+base+"/big", pBig),
		summarise(devDevice, "curl --noproxy '*' "+base+"/big", tBig),
		summarise(connDirect, "curl "+base+"/small", dSmall), summarise(connProxyAware, "curl -p "+base+"/small", pSmall),
		summarise(connDevice, "curl --noproxy '*' "+base+"/small", tSmall))
	return nil
}

// seconds reads curl's -w times (seconds, one a line) as milliseconds.
func seconds(out string) []float64 {
	var ds []float64
	for _, f := range strings.Fields(out) {
		if v, err := strconv.ParseFloat(f, 64); err == nil {
			ds = append(ds, v*1000)
		}
	}
	return ds
}

// deviceRatios are the network device's targets (issue 39): a download at
// least 0.8x the direct one's speed each way, a new connection at most
// 1 ms slower.
func deviceRatios(r *Report) []Ratio {
	get := func(name string) float64 {
		for _, s := range r.Device {
			if s.Name == name {
				return s.MedianMs
			}
		}
		return 0
	}
	var out []Ratio
	direct := get(devDirect)
	if direct == 0 {
		return nil
	}
	for _, name := range []string{devProxyAware, devDevice} {
		if v := get(name); v > 0 {
			out = append(out, atLeast(fmt.Sprintf("throughput of a %d MB download: %s / direct", deviceMB, strings.TrimPrefix(name, "download in a session, ")), direct/v, 0.8))
		}
	}
	if v, d := get(connDevice), get(connDirect); v > 0 && d > 0 {
		out = append(out, atMost("a new connection's added latency, network device (ms)", v-d, 1, " ms"))
	}
	if v, d := get(connProxyAware), get(connDirect); v > 0 && d > 0 {
		out = append(out, atMost("a new connection's added latency, proxy-aware client (ms)", v-d, 1, " ms"))
	}
	return out
}
