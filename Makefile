# The two commands of the README, plus a build, the benchmark and the installation.
.PHONY: run test build bench release release-bin-path install

PREFIX ?= /opt/pushchat
# The installed binaries carry the Swift runtime (--static-swift-stdlib): they run on a server without the toolchain.
INSTALL_BUILD ?= .build-install
CONFIGURATION ?= release
SWIFT_INSTALL_FLAGS = -c $(CONFIGURATION) --static-swift-stdlib --scratch-path $(INSTALL_BUILD)
PROGRAMS = pushchat-api pushchat-push pushchat-feedback

run:
	./scripts/run.sh

test:
	./scripts/test.sh

build:
	swift build

bench:
	./scripts/bench.sh

# Builds what `install` installs; run it as yourself, then `sudo make install`.
release:
	swift build $(SWIFT_INSTALL_FLAGS)
	@# The release's name for `make install` (releases/VERSION): the commit's date and hash, "-modified" with changes.
	@{ git log -1 --format=%cd-%h --date=format:%Y%m%d%H%M%S 2>/dev/null || date +%Y%m%d%H%M%S-local; } | tr -d '\n' \
		>"$(INSTALL_BUILD)/$(CONFIGURATION)/pushchat-version"
	@if [ -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then \
		echo -modified >>"$(INSTALL_BUILD)/$(CONFIGURATION)/pushchat-version"; \
	else echo >>"$(INSTALL_BUILD)/$(CONFIGURATION)/pushchat-version"; fi

# Where `release` puts the binaries (the deployment test runs the simulator from there).
release-bin-path:
	@swift build $(SWIFT_INSTALL_FLAGS) --show-bin-path

# bin/ (the three programs), migrations/, config/ (the example configuration) and deploy/ (units, timers, crontab,
# environment files, guide) under PREFIX. Checks that no binary needs the toolchain's runtime. It builds nothing (root
# needs no Swift on its PATH, and the build's files stay yours): run `make release` first, as yourself.
install:
	./scripts/install.sh "$(PREFIX)" "$(INSTALL_BUILD)/$(CONFIGURATION)" $(PROGRAMS)
