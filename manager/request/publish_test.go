package request

import (
	"testing"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

// TestPublishOf: the refusals of --publish, each bad input (exit 2).
func TestPublishOf(t *testing.T) {
	for _, tc := range []struct {
		req     Request
		network string
		mode    string
		ok      bool
	}{
		{Request{Publish: []string{"8000", "127.0.0.1:8081:8001"}}, sandbox.NetworkNone, sandbox.ModeBwrap, true},
		{Request{Publish: []string{"8000"}}, sandbox.NetworkHost, sandbox.ModeBwrap, false},
		{Request{Publish: []string{"8000"}, Scope: true}, sandbox.NetworkNone, sandbox.ModeBwrap, false},
		{Request{Publish: []string{"8000"}}, sandbox.NetworkNone, sandbox.ModeLandlock, false},
		{Request{Publish: []string{"8000", "8000:9000"}}, sandbox.NetworkNone, sandbox.ModeBwrap, false},
		{Request{Publish: []string{"3128"}}, sandbox.NetworkAllow, sandbox.ModeBwrap, false},
		{Request{Publish: []string{"3128"}}, sandbox.NetworkNone, sandbox.ModeBwrap, true},
		{Request{Publish: []string{"nope"}}, sandbox.NetworkNone, sandbox.ModeBwrap, false},
	} {
		ports, err := publishOf(tc.req, tc.network, tc.mode)
		if tc.ok != (err == nil) {
			t.Errorf("%+v %s %s: %v %v", tc.req.Publish, tc.network, tc.mode, ports, err)
		}
		if err != nil && errcode.Of(err).Code != "bad-publish" {
			t.Errorf("%+v: code %s", tc.req.Publish, errcode.Of(err).Code)
		}
	}
}
