# Two commands for a newcomer: `make demo` and `make test`. Both install missing Debian packages and build first.
BUILD ?= build
# The sanitizer build: clang with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's coverage,
# holding both the test suite (make test-sanitize) and the fuzz targets (fuzz/run.sh): one build, not two.
SAN_BUILD ?= build-san
JOBS ?= $(shell nproc)
# Unity builds (8 sources per compiler run): a clean build of the tree takes about 60% of the time.
UNITY = -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8

.PHONY: all deps build demo install test test-sanitize fuzz-smoke fuzz clean bench bench-quick bench-events bench-faults score vsix test-vscode

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(UNITY)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The demo builds only the tool (not the tests) and does not write into the user's history.
demo: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target firstfault
	@echo "== firstfault diagnose examples/logs/oom_among_timeouts  (excerpt of a real 8-GPU job log, FunASR issue 2006)"
	@$(BUILD)/firstfault diagnose --no-history examples/logs/oom_among_timeouts; rc=$$?; \
	  if [ $$rc -eq 1 ]; then echo "== exit status 1: a failure was diagnosed (0 healthy, 3 undetermined, 2 bad input)"; else exit $$rc; fi

# All tests: the suite, the suite again under AddressSanitizer + UndefinedBehaviorSanitizer, and a short
# run of every fuzz target (long runs: make fuzz).
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-sanitize
	$(MAKE) --no-print-directory fuzz-smoke  # after: both use $(SAN_BUILD)

test-sanitize: deps
	FF_SAN_BUILD=$(SAN_BUILD) ./fuzz/configure.sh
	cmake --build $(SAN_BUILD) -j $(JOBS)
	FF_SANITIZED=1 FIRSTFAULT_CACHE_DIR=$(CURDIR)/$(SAN_BUILD)/hs-cache ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --test-dir $(SAN_BUILD) --output-on-failure -j $(JOBS)

FUZZ_SMOKE_SECONDS ?= 20
fuzz-smoke: deps
	FF_SAN_BUILD=$(SAN_BUILD) ./fuzz/run.sh $(FUZZ_SMOKE_SECONDS)

FUZZ_SECONDS ?= 1800
fuzz: deps
	FF_SAN_BUILD=$(SAN_BUILD) ./fuzz/run.sh $(FUZZ_SECONDS)

# Speed and memory against rg and grep on generated multi-rank logs (bench/README.md). Long: 30-60 min.
bench: deps
	bench/run.sh

bench-quick: deps
	bench/run.sh --quick

# Map and reduce on a generated 1,024-rank tree: events size, scan and merge times (bench/README.md).
bench-events: build
	bench/events_bench.sh $(BUILD)/firstfault build-bench/events

# The fault matrix of real runs (bench/faults/README.md): real torchrun/mpirun/srun jobs on CPU, one injected
# fault each, scored into bench/faults/results.json. About an hour on 2 cores; root; not part of make test.
bench-faults: build
	./scripts/install-deps.sh --bench-faults
	bench/faults/run.sh --bin $(BUILD)/firstfault --out bench/faults/results.json

# The labelled corpus and its scorer live in the team's shared folder beside this repository.
score: build
	@test -f ../shared/tools/score_corpus.py || { echo "score: needs ../shared (the shared corpus); tests/corpus runs in make test"; exit 2; }
	python3 ../shared/tools/score_corpus.py --bin $(BUILD)/firstfault ../shared/corpus

# make install [PREFIX=/usr/local]: the binary, its man page and bash/zsh/fish completions
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The VS Code extension (editors/vscode/README.md): $(BUILD)/firstfault.vsix, then the files in it.
# Offline once `deps` has run npm ci there; install with: code --install-extension $(BUILD)/firstfault.vsix
VSIX = $(abspath $(BUILD))/firstfault.vsix
vsix: deps
	@mkdir -p $(BUILD)
	cd editors/vscode && npm run --silent compile && \
	  npx --no-install vsce package --no-update-package-json --no-git-tag-version --no-rewrite-relative-links --out $(VSIX) </dev/null
	python3 -m zipfile -l $(VSIX)

# The extension in a real VS Code: code-server on 127.0.0.1 driven by playwright-core in Debian's chromium
# (docs/editors.md, "Tests"). Not in `make test`: tests/vscode/install.sh adds ~800 MB and 4-10 minutes of
# native builds the first time; the test itself takes under a minute.
test-vscode: build vsix
	tests/vscode/install.sh
	tests/vscode/run.sh $(BUILD)/firstfault $(VSIX) tests $(BUILD)/vscode-artifacts

clean:
	rm -rf $(BUILD) $(SAN_BUILD) build-asan build-fuzz  # the last two: trees of older versions
