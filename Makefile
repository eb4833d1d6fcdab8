# Thin wrapper over CMake. `make run` and `make test` are the Quick start.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
RUN_ARGS ?= --workload qwen3-14b --host-alloc retain --json $(BUILD)/bench.json --svg $(BUILD)/bench.svg

.PHONY: all deps configure run test asan tsan fuzz clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@./scripts/deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

run: all
	$(BUILD)/bin/hbg bench $(RUN_ARGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Sanitizer builds in their own folders.
asan:
	$(MAKE) test BUILD=build-asan \
	  CMAKE_FLAGS="-DHBG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"

tsan:
	$(MAKE) test BUILD=build-tsan \
	  CMAKE_FLAGS="-DHBG_TSAN=ON -DCMAKE_BUILD_TYPE=Debug"

# libFuzzer targets (clang), and a short run of each.
FUZZ_SECONDS ?= 60
fuzz:
	@./scripts/deps.sh --with-clang
	@test -f build-fuzz/CMakeCache.txt || cmake -S . -B build-fuzz \
	  -DCMAKE_C_COMPILER=clang -DHBG_FUZZ=ON -DHBG_SANITIZE=ON \
	  -DCMAKE_BUILD_TYPE=Debug -DHBG_WITH_CUDA=OFF
	cmake --build build-fuzz -j $(JOBS)
	./scripts/fuzz-run.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf build build-asan build-tsan build-fuzz
