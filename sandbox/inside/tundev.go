package inside

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// The session's network device (network allow): a TUN device the exec
// shim makes in the unit's network namespace, with the two capabilities
// the unit gives it for that (AmbientCapabilities: CAP_NET_ADMIN over the
// namespace, CAP_NET_BIND_SERVICE for the DNS sockets on loopback port
// 53), which it drops on every thread before it execs bwrap; it hands the
// device and the sockets to the init (NetFDsEnv), whose network stack
// (package sandbox/netstack) serves them. bwrap could not make the device
// itself: its --dev makes it nest a second user namespace, in which the
// init's capabilities are, below the one that owns bwrap's network
// namespace, so that the kernel refuses TUNSETIFF (EPERM).
const (
	TUNDevice = "mosaic0"
	// TUNMTU is the device's MTU: large, as the stack and the kernel
	// each segment on their side of a device that no wire limits.
	TUNMTU = 65520
	// NetFDsEnv carries the device's descriptor and the DNS sockets' to
	// the init: "TUN,UDP,TCP[,UDP,TCP]...", the sockets a pair per
	// loopback address (LoopbackDNS).
	NetFDsEnv = "MOSAIC_NET_FDS"
)

// TUNAddr is the device's own address; the default route leads to it.
var TUNAddr = netip.MustParseAddr("240.0.0.1")

// openTUN makes the TUN device (needs CAP_NET_ADMIN over the session's
// network namespace), brings it up with TUNAddr and routes every IPv4
// address to it. IPv6 has no route: a connection there fails at once.
func openTUN() (int, error) {
	fd, err := unix.Open(sandbox.TUNPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("cannot open %s: %w", sandbox.TUNPath, err)
	}
	ifr, err := unix.NewIfreq(TUNDevice)
	if err == nil {
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		// Persistent: the device then goes with the unit's network
		// namespace, in the kernel's own time (its cleanup work), not when
		// the init exits: the last close of a device that is not persistent
		// unregisters it there and then, and the exit waits on its RCU
		// grace periods (20 ms of every session's end, measured).
		err = unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1)
	}
	if err == nil {
		err = configure(TUNDevice)
	}
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("cannot set up the session's network device %s: %w", TUNDevice, err)
	}
	return fd, nil
}

// configure brings the device up with its MTU and address and makes it the
// default route, over rtnetlink.
func configure(name string) error {
	s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	if err := unix.Bind(s, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("index of %s: %w", name, err)
	}
	index := int32(ifr.Uint32())
	a4 := TUNAddr.As4()

	// No IPv6 on the device, asked before it is up: else the kernel gives
	// it a link-local address and route (fe80::/64), through which a
	// connection goes to a stack that speaks IPv4 only and hangs until the
	// client gives up, where one without a route fails at once. A kernel
	// without IPv6 refuses the attribute, and needs nothing.
	noV6 := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: index}
	genNone := attr(unix.IFLA_AF_SPEC, attr(unix.AF_INET6, attr(unix.IFLA_INET6_ADDR_GEN_MODE, []byte{in6AddrGenModeNone})))
	if err := request(s, unix.RTM_NEWLINK, 0, append(structBytes(&noV6), genNone...)); err != nil && err != unix.EAFNOSUPPORT {
		return fmt.Errorf("turning IPv6 off on %s: %w", name, err)
	}
	// No multicast either: a device that has it sends IGMP reports of its
	// own as it comes up, which would start mosaic-net (startNetOnUse)
	// in a session that never uses the network.
	link := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: index, Flags: unix.IFF_UP, Change: unix.IFF_UP | unix.IFF_MULTICAST}
	linkMsg := append(structBytes(&link), attr(unix.IFLA_MTU, u32(TUNMTU))...)
	if err := request(s, unix.RTM_NEWLINK, 0, linkMsg); err != nil {
		return fmt.Errorf("bringing %s up: %w", name, err)
	}
	addr := unix.IfAddrmsg{Family: unix.AF_INET, Prefixlen: 32, Index: uint32(index)}
	addrMsg := append(structBytes(&addr), append(attr(unix.IFA_LOCAL, a4[:]), attr(unix.IFA_ADDRESS, a4[:])...)...)
	if err := request(s, unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, addrMsg); err != nil {
		return fmt.Errorf("address of %s: %w", name, err)
	}
	route := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST}
	routeMsg := append(structBytes(&route), append(attr(unix.RTA_OIF, u32(uint32(index))), attr(unix.RTA_PREFSRC, a4[:])...)...)
	if err := request(s, unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, routeMsg); err != nil {
		return fmt.Errorf("default route to %s: %w", name, err)
	}
	return nil
}

// in6AddrGenModeNone is the kernel's IN6_ADDR_GEN_MODE_NONE: no link-local
// address of its own making.
const in6AddrGenModeNone = 1

// request sends one rtnetlink request and waits for its acknowledgement.
func request(s int, typ uint16, flags uint16, body []byte) error {
	h := unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr + len(body)), Type: typ,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | flags, Seq: uint32(typ)}
	msg := append(structBytes(&h), body...)
	if err := unix.Sendto(s, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(s, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if errno := int32(binary.NativeEndian.Uint32(m.Data[:4])); errno != 0 {
				return unix.Errno(-errno)
			}
			return nil
		}
	}
	return fmt.Errorf("no acknowledgement from the kernel")
}

// attr is one rtnetlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	a := unix.RtAttr{Len: uint16(unix.SizeofRtAttr + len(data)), Type: typ}
	b := append(structBytes(&a), data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// u32 is v in the kernel's byte order.
func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// structBytes is the memory of the fixed-size kernel struct *p.
func structBytes[T any](p *T) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))...)
}

// passNetwork makes the session's network device and its DNS sockets on
// loopback (the shim, with the unit's two capabilities), hands their
// descriptors to the init in env, and drops every capability.
func passNetwork(env []string) ([]string, error) {
	tun, err := openTUN()
	if err != nil {
		return nil, err
	}
	fds := []int{tun}
	for _, a := range LoopbackDNS() {
		sa := &unix.SockaddrInet4{Port: 53, Addr: a.As4()}
		for _, typ := range []int{unix.SOCK_DGRAM, unix.SOCK_STREAM} {
			s, err := unix.Socket(unix.AF_INET, typ, 0)
			if err == nil {
				err = unix.Bind(s, sa)
			}
			if err == nil && typ == unix.SOCK_STREAM {
				err = unix.Listen(s, 128)
			}
			if err != nil {
				return nil, fmt.Errorf("cannot listen for the session's DNS on %s: %w", a, err)
			}
			fds = append(fds, s)
		}
	}
	var list []string
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return nil, err
		}
		list = append(list, strconv.Itoa(fd))
	}
	if err := DropCapabilities(); err != nil {
		return nil, err
	}
	os.Setenv(NetFDsEnv, strings.Join(list, ",")) // for the weakened build, which hands bwrap the whole environment
	return append(env, NetFDsEnv+"="+strings.Join(list, ",")), nil
}

// LoopbackDNS are the loopback addresses a resolver inside may send its
// queries to, which the session's DNS answers on: systemd-resolved's stub
// (127.0.0.53, which a host's /etc/resolv.conf often names) and every
// IPv4 loopback nameserver of /etc/resolv.conf (the sandbox's is the
// host's). A nameserver elsewhere is reached through the device.
func LoopbackDNS() []netip.Addr {
	stub := netip.MustParseAddr("127.0.0.53")
	addrs := []netip.Addr{stub}
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return addrs
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(f[1]); err == nil && a.Unmap().Is4() && a.IsLoopback() && !slices.Contains(addrs, a.Unmap()) {
			addrs = append(addrs, a.Unmap())
		}
	}
	return addrs
}

// startNetOnUse starts mosaic-net (NetPath) on the device and DNS sockets
// the shim handed the init once the command first uses one of them (a
// packet on the device, a DNS query or connection), and does not wait for
// it: the sockets are bound and listening and the device queues what the
// command sends first, which mosaic-net reads when it runs. A command that
// never uses the network costs no mosaic-net (a process start, and the
// stack's package init: issue 39's bound on a default session's start).
// Until then the init holds the descriptors, close-on-exec: the command
// gets none of them. upFront (a test hook) starts it at once, as before.
func startNetOnUse(egressSocket string, upFront bool) error {
	v := os.Getenv(NetFDsEnv)
	os.Unsetenv(NetFDsEnv)
	fds, err := netFDs(v)
	if err != nil {
		return err
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	if upFront {
		return startNet(egressSocket, fds)
	}
	go func() {
		awaitUse(fds)
		if err := startNet(egressSocket, fds); err != nil {
			fmt.Fprintf(os.Stderr, "mosaic init: %v\n", err)
		}
	}()
	return nil
}

// awaitUse returns once one of fds has something to read (a packet, a
// query, a connection), reading nothing.
func awaitUse(fds []int) {
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for {
		if _, err := unix.Poll(pfds, -1); err != unix.EINTR {
			return
		}
	}
}

// startNet starts mosaic-net on fds (netFDs') and does not wait for it.
// The init's own descriptors of them are closed: mosaic-net holds them.
func startNet(egressSocket string, fds []int) error {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	files := []*os.File{null, os.Stderr, os.Stderr}
	var list []string
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "net")
		defer f.Close()
		files = append(files, f)
		list = append(list, strconv.Itoa(3+i))
	}
	env := []string{NetFDsEnv + "=" + strings.Join(list, ",")}
	p, err := os.StartProcess(sandbox.NetPath, []string{sandbox.NetPath, "--egress-socket", egressSocket}, &os.ProcAttr{Env: env, Files: files})
	if err != nil {
		return fmt.Errorf("cannot start the session's network device (%s): %w", sandbox.NetPath, err)
	}
	return p.Release() // reaped as every orphan is
}

// netFDs reads NetFDsEnv: the device's descriptor, then the DNS sockets'
// in pairs (UDP, TCP).
func netFDs(v string) ([]int, error) {
	var fds []int
	for _, f := range strings.Split(v, ",") {
		fd, err := strconv.Atoi(f)
		if err != nil || fd < 3 {
			return nil, fmt.Errorf("the session's network device did not arrive from the exec shim (%s=%q)", NetFDsEnv, v)
		}
		fds = append(fds, fd)
	}
	if len(fds)%2 != 1 {
		return nil, fmt.Errorf("the session's network device did not arrive whole from the exec shim (%s=%q)", NetFDsEnv, v)
	}
	return fds, nil
}

// TakeNetwork is mosaic-net's share of passNetwork: the device's
// descriptor and the DNS sockets' (UDP, TCP), each marked close-on-exec;
// ok false when none were passed.
func TakeNetwork() (tun int, udp, tcp []int, ok bool) {
	v := os.Getenv(NetFDsEnv)
	os.Unsetenv(NetFDsEnv)
	fds, err := netFDs(v)
	if err != nil {
		return -1, nil, nil, false
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	for i := 1; i < len(fds); i += 2 {
		udp, tcp = append(udp, fds[i]), append(tcp, fds[i+1])
	}
	return fds[0], udp, tcp, true
}
