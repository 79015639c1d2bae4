# Thin front over CMake. `make` builds, `make test` builds and runs every
# test, `make demo` runs the main job; see README.md for the rest.
#
#   make [all|build]         configure (once) and build into $(BUILD)
#   make test                build, run every test; ends "N passed, N failed"
#   make demo                build and run the examples (scripts/run-demo)
#   make demo-mpi [NP=2]     the tiled Cholesky on NP MPI ranks (libvarflow-mpi)
#   make install PREFIX=DIR  install header, libraries, varflow.pc, CMake package
#   make check-install       install into a temp prefix and build a consumer
#                            through pkg-config and find_package(varflow);
#                            prove the core needs no CUDA (scripts/check-install)
#   make asan / make tsan    the whole test suite under ASan+UBSan / TSan,
#                            each in its own tree (build-asan, build-tsan)
#   make format              clang-format -i over src include tests examples
#   make format-check        the same, reporting instead of rewriting
#   make lint                clang-tidy and cppcheck over src/ (informational)
#   make docs                the API reference: HTML from include/ with
#                            Doxygen into build-docs/html; any warning (an
#                            undocumented declaration) fails it
#   make clean
#
# CMAKE_ARGS reach CMake: `make test CMAKE_ARGS=-DVF_WERROR=ON` (an existing
# tree is re-configured with them). Before CMake configures a tree,
# scripts/install-deps installs what the build lacks (cJSON for the tools and
# tests, cmake, a compiler; Open MPI for libvarflow-mpi, best effort; with
# apt-get, when root or sudo -n allows); `make docs` runs
# `scripts/install-deps --docs`, which installs doxygen alone;
# `make INSTALL_DEPS=` skips it.
BUILD        ?= build
PREFIX       ?= /usr/local
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS   ?=
INSTALL_DEPS ?= scripts/install-deps
CLANG_FORMAT ?= clang-format
CLANG_TIDY   ?= clang-tidy
CPPCHECK     ?= cppcheck
GENERATOR    := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
# Every C, C++ and CUDA source and header of the tree (build trees are not
# under these folders).
FORMAT_FILES  = $(shell find src include tests examples bench fuzz tools scripts \
                  \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' \
                     -o -name '*.cu' \) -type f 2>/dev/null | sort)

.PHONY: all build configure test demo demo-mpi install check-install asan tsan \
        format format-check lint docs clean

all: build

# Configure a fresh tree (with Ninja when there is one); re-configure an
# existing one only when CMAKE_ARGS asks for something. Either way the
# dependencies come first (a failed install leaves CMake to say what lacks).
DEPS_STEP = $(if $(INSTALL_DEPS),$(INSTALL_DEPS) || \
              echo "make: $(INSTALL_DEPS) failed; configuring anyway";)
configure:
	@if [ ! -f $(BUILD)/CMakeCache.txt ]; then \
	  $(DEPS_STEP) \
	  echo "cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_ARGS)"; \
	  cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_ARGS); \
	elif [ -n "$(strip $(CMAKE_ARGS))" ]; then \
	  $(DEPS_STEP) \
	  echo "cmake -S . -B $(BUILD) $(CMAKE_ARGS)"; \
	  cmake -S . -B $(BUILD) $(CMAKE_ARGS); \
	fi

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# A build failure still ends with the "N passed, N failed" line CI reads.
test:
	@$(MAKE) --no-print-directory build || \
	  { echo "make test: the build failed"; echo "0 passed, 1 failed"; exit 1; }
	scripts/run-tests $(BUILD)

demo: build
	scripts/run-demo $(BUILD)

# The distributed example (docs/DISTRIBUTED.md): needs MPI at configure time
# (scripts/install-deps installs Open MPI).
NP ?= 2
demo-mpi: build
	@if [ ! -x $(BUILD)/examples/mpi_cholesky ]; then \
	  echo "demo-mpi: $(BUILD)/examples/mpi_cholesky was not built (no MPI found; Debian: apt-get install libopenmpi-dev openmpi-bin, then make demo-mpi)"; exit 1; fi
	scripts/mpirun-local $(NP) $(BUILD)/examples/mpi_cholesky

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

check-install: build
	scripts/check-install $(BUILD)

# Whole test suite under ASan+UBSan, then under TSan, each in its own tree.
# scripts/run-tests makes every sanitizer report fatal (halt_on_error) and
# works around machines where TSan or LeakSanitizer cannot run as is.
asan:
	$(MAKE) test BUILD=build-asan CMAKE_ARGS="-DVF_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug $(CMAKE_ARGS)"

tsan:
	$(MAKE) test BUILD=build-tsan CMAKE_ARGS="-DVF_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)"

format:
	$(CLANG_FORMAT) -i $(FORMAT_FILES)

format-check:
	$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_FILES)

# Informational: prints what the tools find, never fails on a finding.
lint: configure
	@echo "== clang-tidy (config: .clang-tidy, compile commands: $(BUILD))"
	@if command -v $(CLANG_TIDY) >/dev/null 2>&1; then \
	  ls src/*/*.c | xargs -P $(JOBS) -n 1 $(CLANG_TIDY) -p $(BUILD) --quiet 2>/dev/null || true; \
	else echo "lint: $(CLANG_TIDY) not found"; fi
	@echo "== cppcheck"
	@if command -v $(CPPCHECK) >/dev/null 2>&1; then \
	  $(CPPCHECK) --quiet --std=c11 --enable=warning,style,performance,portability \
	    --inline-suppr --suppress=missingIncludeSystem -D_GNU_SOURCE -DVF_BUILDING \
	    -I include -I src src/ || true; \
	else echo "lint: $(CPPCHECK) not found"; fi

# The API reference (Doxyfile): doxygen reads the public headers and
# docs/api/mainpage.md and writes HTML to $(DOCS_BUILD)/html. Every
# warning goes to $(DOCS_BUILD)/warnings.log and is printed; one fails the
# target (WARN_AS_ERROR = FAIL_ON_WARNINGS). The version comes from
# varflow.h.
DOXYGEN    ?= doxygen
DOCS_BUILD ?= build-docs
VF_VERSION  = $(shell sed -n 's/^\#define VF_VERSION_[A-Z]* //p' include/varflow.h | paste -sd. -)
docs:
	@$(if $(INSTALL_DEPS),$(INSTALL_DEPS) --docs || \
	  echo "make: $(INSTALL_DEPS) --docs failed; running $(DOXYGEN) anyway";)
	@rm -rf $(DOCS_BUILD)/html && mkdir -p $(DOCS_BUILD)
	@echo "$(DOXYGEN) Doxyfile (varflow $(VF_VERSION), into $(DOCS_BUILD)/html)"
	@{ cat Doxyfile; echo "OUTPUT_DIRECTORY = $(DOCS_BUILD)"; \
	   echo "PROJECT_NUMBER = $(VF_VERSION)"; \
	   echo "WARN_LOGFILE = $(DOCS_BUILD)/warnings.log"; } | $(DOXYGEN) -; \
	  rc=$$?; cat $(DOCS_BUILD)/warnings.log 2>/dev/null; \
	  n=$$(grep -c ': \(warning\|error\): ' $(DOCS_BUILD)/warnings.log 2>/dev/null); \
	  echo "docs: doxygen $$($(DOXYGEN) --version), $${n:-0} warnings, exit status $$rc"; \
	  [ $$rc = 0 ] && [ "$${n:-0}" = 0 ] && \
	    echo "docs: $(DOCS_BUILD)/html/index.html"

clean:
	rm -rf build build-asan build-tsan build-bench $(DOCS_BUILD)

# Benchmarks (owner: bench/). bench/ is a CMake project of its own in
# build-bench/, so `make test` never needs OpenMP, StarPU or BLAS. `make bench`
# runs the full suite (minutes; its pending-ops row holds 10M ops, which
# takes ~6 GiB of memory with varflow today; its wide-op row pushes one op
# over 2^20 vars) and regenerates docs/BENCHMARKS.md;
# `make bench-quick` runs reduced sizes in under 2 minutes; both then run
# W9's sweep of task sizes (bench/w9_run.py; `make bench-w9` runs it alone,
# W9_ARGS is passed to it, e.g. W9_ARGS="--threads 2"); `make
# bench-callgrind` counts instructions per op; `make bench-cxx` measures
# varflow.hpp against the C API (docs/CXX.md). BENCH_ARGS is passed to
# bench/run.py (e.g. BENCH_ARGS="--engines vf-pooled,omp-gcc").
BENCH_ARGS ?=
W9_ARGS ?=

.PHONY: bench bench-quick bench-w9 bench-callgrind bench-cxx

bench:
	cmake -S bench -B build-bench $(GENERATOR) -DCMAKE_BUILD_TYPE=Release
	cmake --build build-bench -j $(JOBS)
	python3 bench/run.py --build build-bench --mode full --docs $(BENCH_ARGS)
	python3 bench/w9_run.py --build build-bench --docs $(W9_ARGS)

bench-quick:
	cmake -S bench -B build-bench $(GENERATOR) -DCMAKE_BUILD_TYPE=Release
	cmake --build build-bench -j $(JOBS)
	python3 bench/run.py --build build-bench --mode quick $(BENCH_ARGS)
	python3 bench/w9_run.py --build build-bench --quick $(W9_ARGS)

bench-w9:
	cmake -S bench -B build-bench $(GENERATOR) -DCMAKE_BUILD_TYPE=Release
	cmake --build build-bench -j $(JOBS)
	python3 bench/w9_run.py --build build-bench --docs $(W9_ARGS)

bench-callgrind:
	cmake -S bench -B build-bench $(GENERATOR) -DCMAKE_BUILD_TYPE=Release
	cmake --build build-bench -j $(JOBS)
	python3 bench/callgrind.py --build build-bench --repeat 3 --docs

# varflow.hpp against the C API (the figures of docs/CXX.md): instructions
# per op of W1/W2 through both (callgrind), then time per op, the engines
# interleaved round by round.
bench-cxx:
	cmake -S bench -B build-bench $(GENERATOR) -DCMAKE_BUILD_TYPE=Release
	cmake --build build-bench -j $(JOBS)
	python3 bench/callgrind.py --build build-bench --repeat 5 --workloads W1,W2 \
	  --engines vf-naive,vf-naive-cxx,vf-pooled,vf-pooled-cxx,vf-pooled-cxx-heap \
	  --out build-bench/callgrind-cxx.json
	python3 bench/cxx_overhead.py --build build-bench --threads 2 --rounds 15

# Reliability (owner: issue 4; see docs/RELIABILITY.md). `make soak` runs the
# soak test for VF_SOAK_SECONDS (default 300) on $(BUILD) (after `make asan`
# or `make tsan`, BUILD=build-asan / build-tsan soaks under a sanitizer);
# `make fuzz` builds fuzz/fuzz_engine.c and fuzz/fuzz_trace.c with clang's
# libFuzzer into build-fuzz/ and fuzzes the engine for FUZZ_SECONDS (default
# 60), then the trace reader for half that (FUZZ_TRACE_SECONDS); `make model-check`
# checks model/varflow.pml with spin (4 scenarios, safety and LTL, 5 mutants
# that must be caught), model/sleep.pml (5 scenarios, safety, 11 mutants)
# and model/async.pml (2 scenarios, safety, 3 mutants).
# Each ends with "N passed, N failed".
VF_SOAK_SECONDS ?= 300
FUZZ_SECONDS    ?= 60

.PHONY: soak fuzz model-check

soak: build
	VF_SOAK_SECONDS=$(VF_SOAK_SECONDS) $(BUILD)/tests/test_soak && \
	  echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }

fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/run-fuzz

model-check:
	scripts/model-check

# W6 across MPI ranks (issue 11): the tiled Cholesky on 1, 2 and 4 ranks on
# libvarflow-mpi and on StarPU-MPI side by side, with the messages and bytes
# moved against the minimum, each factor checked bit for bit; writes the
# section "W6 across ranks (MPI)" of docs/BENCHMARKS.md. Needs Open MPI
# (libopenmpi-dev openmpi-bin); StarPU-MPI is skipped with a note where
# starpumpi-1.3 is missing. MPI_BENCH_ARGS is passed to bench/mpi/mpi_run.py
# (e.g. MPI_BENCH_ARGS="--rounds 5" or "--quick").
MPI_BENCH_ARGS ?=

.PHONY: bench-mpi

bench-mpi:
	cmake -S bench -B build-bench $(GENERATOR) -DCMAKE_BUILD_TYPE=Release
	cmake --build build-bench -j $(JOBS)
	python3 bench/mpi/mpi_run.py --build build-bench --docs $(MPI_BENCH_ARGS)
