# mosaic: run AI coding agents as confined systemd sessions.
#
#   make demo    a confined demo session (inside contrib/rig.sh where no user manager is reachable)
#   make test    every test, against a real systemd user manager, D-Bus, journald and bwrap:
#                as root, on two systemds in turn (the host's 252, and 257 in a cached Debian 13 root)
#   make build   bin/mosaic, bin/mosaic-stage and bin/mosaic-net (what runs inside sessions), static binaries
#   make install mosaic, mosaic-stage and mosaic-net beside it, its man page, bash/zsh/fish completion and the journal catalog into PREFIX
#                (/usr/local as root, else ~/.local; DESTDIR for packaging)
#   make bench   mosaic side by side with systemd-run, bwrap and srt: docs/BENCHMARKS.md and docs/benchmarks.json

GO ?= go

.PHONY: build install uninstall test demo vet bench clean

# The commit, for a tree without .git (Go's build info has it otherwise);
# in a modified tree with a hash of the modification, so that the two
# binaries of one build tell a stage binary of another apart (manager/stagebin).
COMMIT ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { [ -z "$$(git status --porcelain)" ] || \
	c=$$c-dirty-$$({ git diff HEAD; git ls-files -z -o --exclude-standard | xargs -0r sha256sum; } | sha256sum | cut -c1-12); } && echo $$c)

# urfave/cli's docs (ToMan, ToMarkdown) link blackfriday, whose package init
# runs at every start of mosaic. mosaic writes its man page itself, so the
# build leaves them out.
TAGS = urfave_cli_no_docs

build:
	@# One go build for both, with the same flags: the pair manager/stagebin checks.
	CGO_ENABLED=0 $(GO) build -tags $(TAGS) -trimpath -ldflags "-X main.commit=$(COMMIT)" -o bin/ ./cmd/mosaic ./cmd/mosaic-stage ./cmd/mosaic-net

PREFIX ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(HOME)/.local)
BINDIR = $(DESTDIR)$(PREFIX)/bin
SHAREDIR = $(DESTDIR)$(PREFIX)/share

install: build
	install -d $(BINDIR) $(SHAREDIR)/man/man1 $(SHAREDIR)/bash-completion/completions \
		$(SHAREDIR)/zsh/site-functions $(SHAREDIR)/fish/vendor_completions.d
	install -m 0755 bin/mosaic-stage $(BINDIR)/mosaic-stage
	install -m 0755 bin/mosaic-net $(BINDIR)/mosaic-net
	install -m 0755 bin/mosaic $(BINDIR)/mosaic
	bin/mosaic man > $(SHAREDIR)/man/man1/mosaic.1
	bin/mosaic completion bash > $(SHAREDIR)/bash-completion/completions/mosaic
	bin/mosaic completion zsh > $(SHAREDIR)/zsh/site-functions/_mosaic
	bin/mosaic completion fish > $(SHAREDIR)/fish/vendor_completions.d/mosaic.fish
	@# The audit events' catalog (journalctl -x); journalctl reads /usr/lib/systemd/catalog
	@# once root has run journalctl --update-catalog.
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/catalog
	install -m 0644 internal/journald/mosaic.catalog $(DESTDIR)$(PREFIX)/lib/systemd/catalog/mosaic.catalog
	@echo "installed $(BINDIR)/mosaic; make sure $(PREFIX)/bin is on your PATH, then run: mosaic doctor"

uninstall:
	rm -f $(BINDIR)/mosaic $(BINDIR)/mosaic-stage $(BINDIR)/mosaic-net $(SHAREDIR)/man/man1/mosaic.1 $(SHAREDIR)/bash-completion/completions/mosaic \
		$(SHAREDIR)/zsh/site-functions/_mosaic $(SHAREDIR)/fish/vendor_completions.d/mosaic.fish \
		$(DESTDIR)$(PREFIX)/lib/systemd/catalog/mosaic.catalog

# staticcheck is pinned in go.mod (its tool directive); the source rules
# (imports down the layers of docs/dev/layout.md, doc comments on their declarations,
# functions within 100 lines, the stage binary linking no CLI, D-Bus or HTTP,
# no write to a plan's fields once made)
# are tests that need no systemd.
vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) tool staticcheck ./...
	$(GO) test -count=1 -run 'TestImportsRunDownTheLayout|TestDocCommentsNameTheirDeclaration|TestFunctionsFit|TestStageLinksLittle|TestNothingChangesAPlan' ./cmd/mosaic/

# A failure names the systemd it happened on; both run either way.
test: vet
	@[ "$$(id -u)" != 0 ] || contrib/install-deps.sh
	@# As root, on the host before the rigs: the rig refuses a user it did not make, rig-root.sh's stamps.
	@[ "$$(id -u)" != 0 ] || $(GO) test -count=1 -run '^(TestRigRefusesWhatItDidNotMake|TestRigMarksItsOlderUsers|TestRigRootIsTodays)$$' ./cmd/mosaic/
	contrib/with-user-manager.sh --systemd host,257 $(GO) test -count=1 -timeout 30m ./...
	@# The real agent CLIs from npm, in a network namespace with no route out (as root).
	@if [ "$$(id -u)" = 0 ]; then contrib/agents.sh test; else echo "make test: the real agents' test (contrib/agents.sh test) needs root"; fi

demo: build
	@[ "$$(id -u)" != 0 ] || contrib/install-deps.sh demo
	contrib/with-user-manager.sh contrib/demo.sh

bench: build
	CGO_ENABLED=0 $(GO) build -tags $(TAGS) -trimpath -o bin/mosaic-bench ./cmd/mosaic-bench
	contrib/bench-peers.sh
	mkdir -p docs
	contrib/with-user-manager.sh contrib/bench.sh > docs/benchmarks.json.tmp
	mv docs/benchmarks.json.tmp docs/benchmarks.json
	bin/mosaic-bench render docs/benchmarks.json > docs/BENCHMARKS.md

clean:
	rm -rf bin
