package manager

import (
	"net"

	"mosaic/internal/errcode"
	"mosaic/units"
)

// checkPublish makes sure every published host address can be listened on
// before anything starts: the forwarder would fail the start anyway, but
// with a reason only its journal has.
func checkPublish(spec units.Spec) error {
	for _, p := range spec.Publish {
		l, err := net.Listen("tcp", p.HostAddr())
		if err != nil {
			return errcode.PublishUnavailable.New("--publish: cannot listen on %s (%w): pick another host port, or stop what listens there", p.HostAddr(), err)
		}
		l.Close()
	}
	return nil
}
