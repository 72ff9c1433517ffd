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
	@echo "== firstfault diagnose examples/logs/oom_among_timeouts  (a real 8-rank torchrun console log)"
	-@$(BUILD)/firstfault diagnose examples/logs/oom_among_timeouts; true

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

score: build
	python3 ../shared/tools/score_corpus.py --bin $(BUILD)/firstfault ../shared/corpus

clean:
	rm -rf $(BUILD)
