# Thin front door over CMake + Ninja + ctest.
#   make        release build into build/ (server binary: build/exec-server)
#   make run    release build, then start the server on the default address
#   make test   ASan+UBSan build into build/asan/, then every test through ctest
#   make valgrind  RelWithDebInfo build into build/vg/, then the black-box tests with
#               the server under valgrind (leaks and invalid accesses fail a test)
BUILD     := build
ASAN      := build/asan
VG        := build/vg
VALGRIND  ?= valgrind --leak-check=full --error-exitcode=99 --child-silent-after-fork=yes \
             --show-leak-kinds=definite,possible --suppressions=$(CURDIR)/tests/valgrind.supp -q
ARGS      ?=
CMAKE_GEN := -G Ninja

.PHONY: all deps run test valgrind clean

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

valgrind: deps
	cmake -S . -B $(VG) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(VG)
	cd $(VG) && EXEC_SERVER_WRAPPER="$(VALGRIND)" ctest -j2 -R blackbox --output-on-failure \
	    --timeout 3000

clean:
	rm -rf $(BUILD)
