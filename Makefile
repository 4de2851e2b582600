# Thin front door over CMake + Ninja + ctest.
#   make        release build into build/ (server binary: build/exec-server)
#   make run    release build, then start the server on the default address
#   make test   ASan+UBSan build into build/asan/, then every test through ctest
BUILD     := build
ASAN      := build/asan
ARGS      ?=
CMAKE_GEN := -G Ninja

.PHONY: all deps run test clean

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

clean:
	rm -rf $(BUILD)
