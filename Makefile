# The two commands of the README, plus a build, the benchmark and the installation.
.PHONY: run test build bench release release-bin-path dist install

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

# Builds the programs a release carries, and the simulator the deployment test stands in for Apple with (run it as
# yourself). Only these: the benchmark and the fuzz replayer are not a release's (scripts/bench.sh builds its own here).
RELEASE_PRODUCTS = $(PROGRAMS) pushchat-apns-sim
release:
	@for product in $(RELEASE_PRODUCTS); do echo "swift build $(SWIFT_INSTALL_FLAGS) --product $$product"; \
	    swift build $(SWIFT_INSTALL_FLAGS) --product $$product || exit 1; done

# Where `release` puts the binaries (the deployment test runs the simulator from there).
release-bin-path:
	@swift build $(SWIFT_INSTALL_FLAGS) --show-bin-path

# The release as one tarball, dist/pushchat-VERSION.tar.gz (scripts/dist.sh says what it holds): built once here,
# installed on servers that have no Swift, git or make with its own bin/pushchat-release (deploy/README.md, §1).
dist: release
	./scripts/dist.sh "$(INSTALL_BUILD)/$(CONFIGURATION)" $(PROGRAMS)

# Installs the newest `make dist` folder under PREFIX with its pushchat-release (on this machine: as root, after
# `make dist` as yourself; it builds nothing). Upgrades go through `pushchat-release upgrade` (§16).
install:
	@dir=$$(ls -1td dist/pushchat-*/ 2>/dev/null | head -n 1); \
	[ -n "$$dir" ] || { echo "make install: no release in dist/: run make dist first, as yourself" >&2; exit 1; }; \
	PUSHCHAT_PREFIX="$(PREFIX)" "$${dir}bin/pushchat-release" install
