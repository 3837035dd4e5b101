// Command mosaic-net serves a session's network device: gVisor's
// userspace TCP/IP stack (package sandbox/netstack) on the TUN device and
// DNS sockets the session's exec shim made, each connection relayed to
// the session's egress proxy. mosaic's init starts it inside the sandbox
// of a session in network allow (sandbox.NetPath) and does not wait for
// it; no one else runs it.
//
// It is mosaic's third binary, installed beside mosaic and mosaic-stage
// and built from the same tree, so that the stage binary, whose process
// starts every session pays three times, does not link the stack (whose
// package init and size cost each of those starts 3 ms).
package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"mosaic/internal/acceptloop"
	"mosaic/sandbox/inside"
	"mosaic/sandbox/netstack"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "--egress-socket" {
		fmt.Fprintln(os.Stderr, "mosaic-net: a session's network device, which mosaic's init starts; not you")
		os.Exit(2)
	}
	socket := os.Args[2]
	if err := inside.Undumpable(); err != nil {
		fail(err)
	}
	tun, udp, tcp, ok := inside.TakeNetwork()
	if !ok {
		fail(fmt.Errorf("the network device's descriptors did not arrive (%s)", inside.NetFDsEnv))
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		return acceptloop.DialStarting(ctx, socket, inside.ProxyStartWait)
	}
	if err := netstack.Start(tun, udp, tcp, dial); err != nil {
		fail(err)
	}
	// The command's own syscall filter: what the session sends is parsed
	// here, and the init starts mosaic-net before it filters itself.
	if err := inside.InstallSyscallFilter(nil); err != nil {
		fail(err)
	}
	select {} // served by the stack's goroutines until the sandbox ends
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "mosaic-net: the session's network device is not served: %v\n", err)
	os.Exit(1)
}
