# Thin front door over CMake + Ninja + ctest.
#   make        release build into build/ (server binary: build/exec-server)
#   make run    release build, then start the server on the default address
#   make test   ASan+UBSan build into build/asan/, then every test through ctest
#   make bench  release build, then bench/exec-bench against ours and the reference
#               (installed into ~/.cache/codex-ref by npm when missing); BENCH_ARGS=...
BUILD     := build
ASAN      := build/asan
ARGS      ?=
CMAKE_GEN := -G Ninja

.PHONY: all deps run test bench clean

all: deps
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD)

deps:
	@./scripts/install-deps.sh

run: all
	./$(BUILD)/exec-server $(ARGS)

test: deps
	cmake -S . -B $(ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DEXEC_SANITIZE=ON >/dev/null
	cmake --build $(ASAN)
	cd $(ASAN) && ctest -j2 --output-on-failure --timeout 300

REF_DIR    ?= $(HOME)/.cache/codex-ref
BENCH_ARGS ?=
bench: all
	@ls $(REF_DIR)/node_modules/@openai/codex-linux-x64/vendor/*/bin/codex >/dev/null 2>&1 || \
	  npm install --prefix $(REF_DIR) @openai/codex@0.169.0 || \
	  echo "make bench: could not install the reference; running ours only"
	./$(BUILD)/exec-bench $(BENCH_ARGS)

clean:
	rm -rf $(BUILD)
