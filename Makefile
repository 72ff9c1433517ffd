# Two commands for a newcomer: `make demo` and `make test`. Both install missing Debian packages and build first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test clean bench fuzz score

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@echo "== firstfault diagnose examples/logs/oom_among_timeouts  (excerpt of a real 8-GPU job log, FunASR issue 2006)"
	@$(BUILD)/firstfault diagnose examples/logs/oom_among_timeouts; rc=$$?; \
	  if [ $$rc -eq 1 ]; then echo "== exit status 1: a failure was diagnosed (0 healthy, 3 undetermined, 2 bad input)"; else exit $$rc; fi

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The labelled corpus and its scorer live in the team's shared folder beside this repository.
score: build
	@test -f ../shared/tools/score_corpus.py || { echo "score: needs ../shared (the shared corpus); tests/corpus runs in make test"; exit 2; }
	python3 ../shared/tools/score_corpus.py --bin $(BUILD)/firstfault ../shared/corpus

clean:
	rm -rf $(BUILD)
