# mosaic: run AI coding agents as confined systemd sessions.
#
#   make demo    a confined demo session (inside contrib/rig.sh where no user manager is reachable)
#   make test    every test, against a real systemd user manager, D-Bus, journald and bwrap
#   make build   bin/mosaic, a static binary

GO ?= go

.PHONY: build test demo vet clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/mosaic ./cmd/mosaic

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }

test: vet
	contrib/with-user-manager.sh $(GO) test -count=1 ./...

demo: build
	contrib/with-user-manager.sh contrib/demo.sh

clean:
	rm -rf bin
