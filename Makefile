# mosaic: run AI coding agents as confined systemd sessions.
#
#   make demo    a confined demo session (inside contrib/rig.sh where no user manager is reachable)
#   make test    every test, against a real systemd user manager, D-Bus, journald and bwrap
#   make build   bin/mosaic, a static binary
#   make bench   mosaic side by side with systemd-run, bwrap and srt: docs/BENCHMARKS.md and docs/benchmarks.json

GO ?= go

.PHONY: build test demo vet bench clean

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/mosaic ./cmd/mosaic

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }

test: vet
	contrib/with-user-manager.sh $(GO) test -count=1 ./...

demo: build
	contrib/with-user-manager.sh contrib/demo.sh

bench: build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/mosaic-bench ./cmd/mosaic-bench
	contrib/bench-peers.sh
	mkdir -p docs
	contrib/with-user-manager.sh contrib/bench.sh > docs/benchmarks.json.tmp
	mv docs/benchmarks.json.tmp docs/benchmarks.json
	bin/mosaic-bench render docs/benchmarks.json > docs/BENCHMARKS.md

clean:
	rm -rf bin
