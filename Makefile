# The two commands of the README, plus a build.
.PHONY: run test build bench

run:
	./scripts/run.sh

test:
	./scripts/test.sh

build:
	swift build

bench:
	./scripts/bench.sh
