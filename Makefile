# Thin front door over CMake + Ninja + ctest.
#   make        release build into build/ (server binary: build/exec-server)
#   make run    release build (quiet: its URL is what it prints), then start the server on
#               the default address
#   make install  release build, then install everything under PREFIX (default /usr/local)
#   make test   ASan+UBSan build into build/asan/, then every test through ctest
#               (including two seconds of each fuzz target, built at -O0 into
#               build/fuzz-smoke/)
#               but those labelled containers-by-hand (for their time);
#               warnings are errors (EXEC_WERROR) in the builds of test, fuzz and valgrind;
#               each "SKIP: why" a test printed is repeated at the end (e.g. no npm)
#   make test-containers  the same build, then every sandbox suite run with the server
#               inside a container (ctest -L containers; tests/blackbox/containers.py)
#   make release-check  what make install installs, built Release (-O3) with gcc, and
#               clang's front end over its files with the same flags, into build/release-*,
#               warnings as errors (what .ci/run adds to make test, with the format check)
#   make bench  release build, then bench/exec-bench against ours and the reference
#               (codex REF_VERSION, default 0.171.0, installed by npm when missing:
#               tests/blackbox/codex_ref.py); BENCH_ARGS=...;
#               then bench/relay_bench.py: the remote-mode rows through the relay
#               (RELAY_BENCH_ARGS=...); then bench/fleet_bench.py: exec-server registry's
#               rows (FLEET_BENCH_ARGS=...); then bench/forward_bench.py: TCP forwarding;
#               then bench/client_bench.py: exec-client's own speed, local and through
#               our rendezvous, against the stock codex (CLIENT_BENCH_ARGS=...)
#   make fuzz   clang libFuzzer build into build/fuzz/, then each target for FUZZ_TIME s
#               (default 600; FUZZ_TARGETS="ws uri" runs only those)
#   make valgrind  RelWithDebInfo build into build/vg/, then the black-box tests with
#               the server under valgrind (leaks and invalid accesses fail a test)
#   make soak   ASan+UBSan build into build/asan/, then tests/soak/soak.py: 8 clients of
#               mixed load for SOAK_SECONDS (default 900); fails on any error, sanitizer
#               report, descriptor growth, orphan process, or RSS not back under 64 MB
#               within a minute of the end. Not part of make test
BUILD     := build
ASAN      := build/asan
FUZZ      := build/fuzz
# make test's two seconds a fuzz target come from a tree of their own built at -O0: it
# compiles in 35 s on two cores against 57 s at -O1 (what `make fuzz`'s long runs keep,
# in build/fuzz), and a smoke run is timed, not counted in inputs.
FUZZ_SMOKE := build/fuzz-smoke
FUZZ_TIME ?= 600
FUZZ_TARGETS ?=
VG        := build/vg
# Four tests at once on two cores: the black-box tests wait on processes, sockets and
# timers about half the time (a fresh clone's ctest ran 1,382 s of tests in 473 s at three
# at a time, 1.4 cores busy: bound by the three slots, not by the CPU).
TEST_JOBS ?= 4
VALGRIND  ?= valgrind --leak-check=full --error-exitcode=99 --child-silent-after-fork=yes \
             --show-leak-kinds=definite,possible --suppressions=$(CURDIR)/tests/valgrind.supp -q
ARGS      ?=
CMAKE_GEN := -G Ninja

WERROR    := -DEXEC_WERROR=ON

.PHONY: all deps run test test-containers soak bench fuzz fuzz-build fuzz-smoke-build valgrind \
        clean install \
        release-check release-gcc release-clang

all: deps
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD)

deps:
	@./scripts/install-deps.sh

# run: the build is quiet (scripts/quiet-build.sh: a progress line on a terminal, its
# output in build/build.log, shown only when it fails), so the server's URL is what one sees.
run: deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@./scripts/quiet-build.sh $(BUILD)
	@exec ./$(BUILD)/exec-server $(ARGS)

# make install [PREFIX=/usr/local] [DESTDIR=...]: server, helper, client, library,
# header, pkg-config file, man pages and the systemd unit.
PREFIX ?= /usr/local
install: all
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

test: deps fuzz-smoke-build
	cmake -S . -B $(ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DEXEC_SANITIZE=ON $(WERROR) \
	      -DEXEC_FUZZ_BUILD_DIR=$(abspath $(FUZZ_SMOKE)) >/dev/null
	cmake --build $(ASAN)
	cd $(ASAN) && { ctest -j$(TEST_JOBS) --output-on-failure --timeout 300 -LE containers-by-hand; \
	  rc=$$?; \
	  awk '/^[0-9]+\/[0-9]+ Test: /{t=$$3} /^SKIP: /{print "SKIP in " t ": " substr($$0, 7)}' \
	    Testing/Temporary/LastTest.log; exit $$rc; }

test-containers: deps
	cmake -S . -B $(ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DEXEC_SANITIZE=ON $(WERROR) \
	      -DEXEC_FUZZ_BUILD_DIR=$(abspath $(FUZZ_SMOKE)) >/dev/null
	cmake --build $(ASAN)
	cd $(ASAN) && ctest -L containers --output-on-failure

SOAK_SECONDS ?= 900
soak: deps
	cmake -S . -B $(ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DEXEC_SANITIZE=ON $(WERROR) \
	      -DEXEC_FUZZ_BUILD_DIR=$(abspath $(FUZZ_SMOKE)) >/dev/null
	cmake --build $(ASAN)
	EXEC_SERVER=$(abspath $(ASAN))/exec-server EXEC_BUILD_DIR=$(abspath $(ASAN)) \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:quarantine_size_mb=4 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  SOAK_SECONDS=$(SOAK_SECONDS) python3 tests/soak/soak.py

# Release (-O3) with gcc and with clang (Debian's): no warnings, as a packager builds what
# `make install` installs (the CMake target `product`; the tests and the bench are held to
# the same warnings as errors by make test's build, at -O0). gcc builds it (some of its
# warnings come from its optimizers); clang's come from its front end, which runs over each
# of its files with the same flags without generating code (scripts/syntax-check.py: half
# the CPU of a clang build, which CI's clock counts). The two are independent (make -j2
# release-check runs them at once).
release-check: release-gcc release-clang
release-gcc: deps
	CC=gcc cmake -S . -B $(BUILD)/release-gcc $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release \
	      $(WERROR) >/dev/null
	cmake --build $(BUILD)/release-gcc --target product
release-clang: deps
	CC=clang cmake -S . -B $(BUILD)/release-clang $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release \
	      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON $(WERROR) >/dev/null
	cmake --build $(BUILD)/release-clang --target syntax-check

REF_VERSION ?= 0.171.0
BENCH_ARGS ?=
RELAY_BENCH_ARGS ?=
FLEET_BENCH_ARGS ?=
CLIENT_BENCH_ARGS ?=
bench: all
	@python3 tests/blackbox/codex_ref.py install $(REF_VERSION) || \
	  echo "make bench: could not install the reference; running ours only"
	./$(BUILD)/exec-bench --ref-version $(REF_VERSION) $(BENCH_ARGS)
	python3 bench/relay_bench.py --build $(BUILD) --ref-version $(REF_VERSION) $(RELAY_BENCH_ARGS)
	python3 bench/fleet_bench.py --build $(BUILD) $(FLEET_BENCH_ARGS)
	python3 bench/forward_bench.py --build $(BUILD)
	python3 bench/client_bench.py --build $(BUILD) --ref-version $(REF_VERSION) $(CLIENT_BENCH_ARGS)

# The fuzzers need clang (libFuzzer); CC is read only when a tree is first configured.
# $(call fuzz_tree,DIR,OPTIMIZATION)
fuzz_tree = CC=clang cmake -S . -B $(1) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DEXEC_FUZZ=ON \
	      -DCMAKE_C_FLAGS_DEBUG="-g $(2)" -DEXEC_SANITIZE=ON $(WERROR) >/dev/null && \
	    cmake --build $(1) --target fuzzers
fuzz-build: deps
	$(call fuzz_tree,$(FUZZ),-O1)
fuzz-smoke-build: deps
	$(call fuzz_tree,$(FUZZ_SMOKE),-O0)

fuzz: fuzz-build
	./tests/fuzz/run.sh $(FUZZ) $(FUZZ_TIME) $(FUZZ_TARGETS)

valgrind: deps
	cmake -S . -B $(VG) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(WERROR) >/dev/null
	cmake --build $(VG)
	cd $(VG) && EXEC_SERVER_WRAPPER="$(VALGRIND)" ctest -j2 -R blackbox --output-on-failure \
	    --timeout 3000

clean:
	rm -rf $(BUILD)
