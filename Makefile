# hetrain — build, test, demo, bench, deps.
#
#   make            build build/bin/hetrain, build/bin/hetrain-pack and the test binaries (with CUDA also the GPU
#                   tests and hetrain on the host emulation of CUDA: test_gpu_on_host, build/on-host/hetrain)
#   make deps       install the Debian packages hetrain needs (idempotent)
#   make test       run every test; ends with "N passed, M failed[, K skipped]"
#   make demo       install what is missing, pack Fashion-MNIST, train on it
#   make bench      benchmarks that print comparisons (never fail on time)
#   make gpu-check  GPU op tests + GPU benchmark lines, results in build/gpu-check (OUT=dir to change)
#   make gpu-first-run  the first run on a GPU machine, within 9 minutes: versions, GPU tests with parity figures,
#                   training at each precision against the CPU, mixed CPU+GPU job, memcheck; build/gpu-first-run (OUT=dir)
#   make gpu-bundle test_gpu + bench_train_step + the shared libraries they need, for a bare GPU machine (DEST=dir)
#   make gpu-bundle-archive  the same, also as one DEST.tar.xz to copy there
#   make install    copy the built binaries, job scripts, Python tools, model files, docs and an Lmod module file to PREFIX
#                   (run make first; docs/install.md says what goes where)
#
# Switches (plain variables):
#   CUDA=auto|0|1   build the CUDA backend: auto = when nvcc is found (default)
#   CUDA_ARCH=...   nvcc -gencode list (default sm_80, sm_90 + PTX)
#   MPI_HOME, HDF5_HOME, CUDA_HOME, BLAS_HOME   prefixes as cluster module systems set them
#   DNNL=0          build without oneDNN even when it is installed (CPU convolutions on im2col + GEMM)
#   DNNL_HOME=dir   oneDNN's prefix, when it is not in the system paths
#   DEBUG=1         -O0 -g
#   PREFIX=dir      where make install puts hetrain (default /usr/local); DESTDIR=dir stages it under dir
# Objects live in one folder per configuration (build/cpu, build/cuda); binaries in build/bin are those of
# the configuration built last.

SHELL := /bin/bash
.DEFAULT_GOAL := all
.SUFFIXES:
.SECONDEXPANSION:

CUDA ?= auto
DEBUG ?= 0
ifeq ($(filter $(CUDA),auto 0 1),)
  $(error CUDA must be auto, 0 or 1 (got '$(CUDA)'))
endif

# ---------------------------------------------------------------- dependency probes
# MPI: the compiler wrapper is the compiler.
ifdef MPI_HOME
  MPICXX ?= $(MPI_HOME)/bin/mpicxx
else
  MPICXX ?= $(shell command -v mpicxx 2>/dev/null)
endif
HAVE_MPI := $(if $(MPICXX),$(shell $(MPICXX) --version >/dev/null 2>&1 && echo 1),)

# HDF5: HDF5_HOME, else pkg-config (parallel build first, serial as fallback).
ifdef HDF5_HOME
  HDF5_CFLAGS := -I$(HDF5_HOME)/include
  HDF5_LIBS := -L$(HDF5_HOME)/lib -Wl,-rpath,$(HDF5_HOME)/lib -lhdf5
else
  HDF5_PC := $(firstword $(foreach p,hdf5-openmpi hdf5-serial hdf5,$(shell pkg-config --exists $(p) 2>/dev/null && echo $(p))))
  HDF5_CFLAGS := $(if $(HDF5_PC),$(shell pkg-config --cflags $(HDF5_PC)),)
  HDF5_LIBS := $(if $(HDF5_PC),$(shell pkg-config --libs $(HDF5_PC)),)
endif

# BLAS: OpenBLAS (cblas.h + openblas_set_num_threads).
ifdef BLAS_HOME
  BLAS_CFLAGS := -I$(BLAS_HOME)/include
  BLAS_LIBS := -L$(BLAS_HOME)/lib -Wl,-rpath,$(BLAS_HOME)/lib -lopenblas
else
  # Prefer Debian's OpenMP build of OpenBLAS: it shares hetrain's OpenMP thread pool. With the pthread
  # build, OpenMP workers spin while OpenBLAS's own threads want the same cores (2 threads ran 3x slower
  # than 1 on resnet20 here).
  OPENBLAS_OMP_DIR := /usr/lib/$(shell gcc -dumpmachine 2>/dev/null)/openblas-openmp
  BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
  ifneq ($(wildcard $(OPENBLAS_OMP_DIR)/libopenblas.so.0),)
    BLAS_LIBS := -L$(OPENBLAS_OMP_DIR) -Wl,-rpath,$(OPENBLAS_OMP_DIR) -l:libopenblas.so.0
    BLAS_KIND := OpenMP build
  else
    BLAS_LIBS := $(or $(shell pkg-config --libs openblas 2>/dev/null),-lopenblas)
    BLAS_KIND := pthread build: install libopenblas0-openmp for multi-threaded ranks
  endif
endif

# oneDNN (optional, recommended): the CPU convolutions run on its kernels, JIT-compiled at run time for the
# CPU the rank finds (AVX2, AVX-512, ...), so one binary is fast on every compute node. Without it they use
# im2col + OpenBLAS GEMM, several times slower (docs/cpu-performance.md).
ifdef DNNL_HOME
  DNNL_CFLAGS := -I$(DNNL_HOME)/include
  DNNL_LIBS := -L$(DNNL_HOME)/lib -Wl,-rpath,$(DNNL_HOME)/lib -ldnnl
else
  DNNL_LIBS := -ldnnl
endif

# Probe by compiling: a header that is there but unusable counts as missing.
probe = $(shell scripts/probe.sh '$(or $(MPICXX),c++)' '$(2)' '$(3)' '$(4)')
HAVE_HDF5  := $(call probe,hdf5,hdf5.h,$(HDF5_CFLAGS),$(HDF5_LIBS))
HAVE_BLAS  := $(call probe,blas,cblas.h,$(BLAS_CFLAGS),$(BLAS_LIBS))
HAVE_BOOST := $(call probe,boost,boost/program_options.hpp,,-lboost_program_options)
HAVE_GTEST := $(call probe,gtest,gtest/gtest.h,,-lgtest -pthread)
HAVE_ZLIB  := $(call probe,zlib,zlib.h,,-lz)
HAVE_JPEG  := $(call probe,jpeg,turbojpeg.h,,-lturbojpeg)
HAVE_PNG   := $(call probe,png,png.h,,-lpng)
HAVE_YAML  := $(call probe,yaml-cpp,yaml-cpp/yaml.h,,-lyaml-cpp)
HAVE_DNNL  := $(if $(filter 0,$(DNNL)),,$(call probe,dnnl,dnnl.hpp,$(DNNL_CFLAGS),$(DNNL_LIBS)))

# CUDA
CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)),/usr/local/cuda)
NVCC := $(CUDA_HOME)/bin/nvcc
HAVE_NVCC := $(shell test -x $(NVCC) && echo 1)
ifeq ($(CUDA),auto)
  USE_CUDA := $(HAVE_NVCC)
else ifeq ($(CUDA),1)
  ifneq ($(HAVE_NVCC),1)
    $(error CUDA=1 but no nvcc at $(NVCC); set CUDA_HOME or use CUDA=0)
  endif
  USE_CUDA := 1
else
  USE_CUDA :=
endif
CONFIG := $(if $(USE_CUDA),cuda,cpu)
# The GPU tests on the host (test/gpu/on_host) run a block's threads as Boost.Context fibers.
HAVE_FIBERS := $(if $(USE_CUDA),$(call probe,boost-context,boost/context/fiber.hpp,,-lboost_context))

mark = $(if $(1),✓,✗)
ifeq ($(MAKELEVEL),0)
ifeq ($(filter deps help clean install,$(MAKECMDGOALS)),)
$(info hetrain build ($(CONFIG) configuration):)
$(info   $(call mark,$(HAVE_MPI)) MPI          $(MPICXX))
$(info   $(call mark,$(HAVE_HDF5)) HDF5         $(or $(HDF5_HOME),$(HDF5_PC)))
$(info   $(call mark,$(HAVE_BLAS)) OpenBLAS     $(BLAS_KIND))
$(info   $(call mark,$(HAVE_BOOST)) Boost.Program_options)
$(info   $(call mark,$(HAVE_ZLIB)) zlib   $(call mark,$(HAVE_JPEG)) libturbojpeg   $(call mark,$(HAVE_PNG)) libpng   $(call mark,$(HAVE_YAML)) yaml-cpp)
$(info   $(call mark,$(HAVE_DNNL)) oneDNN       $(if $(HAVE_DNNL),CPU convolutions JIT-compiled for the CPU found at run time,$(if $(filter 0,$(DNNL)),not used: DNNL=0,not found (libdnnl-dev)); CPU convolutions use im2col + GEMM (slower)))
$(info   $(call mark,$(HAVE_GTEST)) GoogleTest)
$(info   $(call mark,$(HAVE_NVCC)) CUDA (nvcc)  $(if $(HAVE_NVCC),$(NVCC)$(if $(USE_CUDA),, — not used: CUDA=$(CUDA)),not found; CPU-only build))
$(if $(USE_CUDA),$(info   $(call mark,$(HAVE_FIBERS)) Boost.Context  $(if $(HAVE_FIBERS),the GPU tests on the host (test_gpu_on_host; docs/testing.md),not found (libboost-context-dev): no GPU tests on the host)))
endif
endif

REQUIRED_MISSING := $(strip $(if $(HAVE_MPI),,MPI) $(if $(HAVE_HDF5),,HDF5) $(if $(HAVE_BLAS),,OpenBLAS) \
  $(if $(HAVE_BOOST),,Boost.Program_options) $(if $(HAVE_ZLIB),,zlib) $(if $(HAVE_JPEG),,libturbojpeg) $(if $(HAVE_PNG),,libpng) $(if $(HAVE_YAML),,yaml-cpp))

# ---------------------------------------------------------------- flags
BUILD := build
OBJ := $(BUILD)/$(CONFIG)
BIN := $(BUILD)/bin
OPT := $(if $(filter 1,$(DEBUG)),-O0 -g,-O3 -march=x86-64-v2 -mtune=native)
CXXFLAGS := -std=c++17 $(OPT) -g1 -Wall -Wextra -Wno-unused-parameter -fopenmp -pthread -MMD -MP -DOMPI_SKIP_MPICXX \
  -Iinclude -Isrc $(HDF5_CFLAGS) $(BLAS_CFLAGS) $(if $(HAVE_DNNL),$(DNNL_CFLAGS))
LDLIBS := $(HDF5_LIBS) $(BLAS_LIBS) $(if $(HAVE_DNNL),$(DNNL_LIBS)) -lboost_program_options -lyaml-cpp -lturbojpeg -lpng -lz -fopenmp -pthread
ifeq ($(CONFIG),cuda)
  CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
  CXXFLAGS += -DHETRAIN_WITH_CUDA -I$(CUDA_HOME)/include
  NVCCFLAGS := -std=c++17 -O3 $(CUDA_ARCH) -Iinclude -Isrc -Xcompiler -fPIC,-Wall -MMD -MP
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lnccl -lcudart
  LDLIBS += $(CUDA_LIBS)
endif
CXX_PLAIN ?= g++

# ---------------------------------------------------------------- sources
# One archive per subsystem folder; link order runs from the top of the architecture to the bottom, and no
# archive calls into one listed before it (docs/architecture.md, "Ops").
SUBSYSTEMS := train dist detect data nn ops cuda core
# src/ops/<op>/ holds one op each (ops/dispatch.hpp): its entry points and CPU code in every build; its CUDA
# twin kernels/<op>.cu only with CUDA. src/ops/common/ holds what several ops share (the unary-op helper, the
# CPU loop splitting, GEMM); src/ops/*/dnnl/ the oneDNN code, src/ops/*/dnnl_absent/ what a build without
# oneDNN gets instead. The ops archive is linked whole: its files register their implementations while the
# program starts.
# src/cuda/ is the device layer: the CUDA runtime and the vendor libraries (*.cpp, *.cu) and, in
# src/cuda/stubs/, what a CPU-only build gets instead: the same functions, failing loudly ("built without
# CUDA"), so public headers never change with the build. src/cuda/common/ is plain C++ that both
# configurations build (rules about GPUs that need no GPU). The device layer is linked whole too: it
# registers itself with core (tensor memory) while the program starts.
DNNL_DIR := $(if $(HAVE_DNNL),dnnl,dnnl_absent)
srcs_of_ops = $(wildcard src/ops/*.cpp src/ops/*/*.cpp src/ops/*/$(DNNL_DIR)/*.cpp) $(if $(USE_CUDA),$(wildcard kernels/*.cu))
srcs_of_cuda = $(wildcard src/cuda/common/*.cpp) $(if $(USE_CUDA),$(wildcard src/cuda/*.cu src/cuda/*.cpp),$(wildcard src/cuda/stubs/*.cpp))
srcs_of = $(if $(filter ops cuda,$(1)),$(srcs_of_$(1)),$(wildcard src/$(1)/*.cpp))
objs_of = $(patsubst %,$(OBJ)/%.o,$(basename $(call srcs_of,$(1))))
lib_of = $(OBJ)/lib/libht_$(1).a
ALL_LIBS := $(foreach s,$(SUBSYSTEMS),$(call lib_of,$(s)))
WHOLE_LIBS := $(call lib_of,ops) $(call lib_of,cuda)
WHOLE_ON := -Wl,--whole-archive
WHOLE_OFF := -Wl,--no-whole-archive
link_libs = $(foreach l,$(1),$(if $(filter $(WHOLE_LIBS),$(l)),$(WHOLE_ON) $(l) $(WHOLE_OFF),$(l)))

$(OBJ)/lib/libht_%.a: $$(call objs_of,$$*)
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $(filter %.o,$^)

# Whether oneDNN is used changes which objects make up libht_ops.a: a stamp that changes with it rebuilds
# the archive (and so relinks the programs) when DNNL=0 or an install flips it.
DNNL_STAMP := $(OBJ)/.dnnl
$(shell mkdir -p $(OBJ); [ "$$(cat $(DNNL_STAMP) 2>/dev/null)" = "$(if $(HAVE_DNNL),yes,no)" ] || echo $(if $(HAVE_DNNL),yes,no) > $(DNNL_STAMP))
$(call lib_of,ops): $(DNNL_STAMP)

$(OBJ)/%.o: %.cpp
	@mkdir -p $(dir $@)
	@echo "  CXX  $<"
	@$(MPICXX) $(CXXFLAGS) -c $< -o $@

$(OBJ)/%.o: %.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC $<"
	@$(NVCC) $(NVCCFLAGS) -c $< -o $@

# build/bin holds the binaries of the configuration built last: a stamp that changes with the
# configuration makes every binary relink when CUDA=0/1 switches.
CONFIG_STAMP := $(BIN)/.configuration
$(shell mkdir -p $(BIN); [ "$$(cat $(CONFIG_STAMP) 2>/dev/null)" = "$(CONFIG)" ] || echo $(CONFIG) > $(CONFIG_STAMP))

# ---------------------------------------------------------------- version (hetrain --version)
# Only src/apps/hetrain_main.cpp sees these macros, so a new commit recompiles that one file. Its stamp
# $(OBJ)/.build-info (release, git describe, configuration; scripts/build-info.sh) is rewritten only when
# its content changes, so the object is rebuilt exactly when one of them changes.
BUILD_INFO := $(OBJ)/.build-info
$(BUILD_INFO): FORCE
	@mkdir -p $(dir $@)
	@scripts/build-info.sh '$(MPICXX)' '$(USE_CUDA)' '$(HDF5_HOME)' '$(HDF5_PC)' '$(BLAS_HOME)' '$(BLAS_KIND)' '$(HAVE_DNNL)' '$(DNNL_HOME)' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
FORCE:
build_info_line = "\"$$(sed -n $(1)p $(BUILD_INFO))\""
$(OBJ)/src/apps/hetrain_main.o: $(BUILD_INFO)
$(OBJ)/src/apps/hetrain_main.o: CXXFLAGS += -DHETRAIN_VERSION=$(call build_info_line,1) \
  -DHETRAIN_GIT=$(call build_info_line,2) -DHETRAIN_BUILD_CONFIG=$(call build_info_line,3)

# ---------------------------------------------------------------- programs
APPS := hetrain hetrain-pack
$(BIN)/hetrain: $(OBJ)/src/apps/hetrain_main.o $(ALL_LIBS) $(CONFIG_STAMP)
	@mkdir -p $(BIN)
	@echo "  LD   $@"
	@$(MPICXX) -o $@ $< $(call link_libs,$(ALL_LIBS)) $(LDLIBS)

$(BIN)/hetrain-pack: $(CONFIG_STAMP) $(OBJ)/data_tools/hetrain_pack.o $(patsubst %,$(OBJ)/%.o,$(basename $(filter-out data_tools/hetrain_pack.cpp,$(wildcard data_tools/*.cpp)))) $(ALL_LIBS)
	@mkdir -p $(BIN)
	@echo "  LD   $@"
	@$(MPICXX) -o $@ $(filter %.o,$^) $(call link_libs,$(ALL_LIBS)) $(LDLIBS)

# ---------------------------------------------------------------- tests
# test/<group>/*.cpp → build/bin/test_<group>. Groups whose name ends in _mpi get a main that starts MPI
# (test/mpi_main.cpp) and run under mpirun; the others use gtest_main. test/gpu is built without MPI,
# HDF5 or Boost so it runs on a bare GPU machine.
TEST_GROUPS := $(notdir $(patsubst %/,%,$(dir $(wildcard test/*/*.cpp))))
TEST_GROUPS := $(sort $(filter-out e2e gpu,$(TEST_GROUPS)))
GPU_TEST_OBJS := $(patsubst %,$(OBJ)/%.o,$(basename $(wildcard test/gpu/*.cpp)))
TEST_BINS := $(patsubst %,$(BIN)/test_%,$(TEST_GROUPS))
test_objs = $(patsubst %,$(OBJ)/%.o,$(basename $(wildcard test/$(1)/*.cpp)))
mpi_main_for = $(if $(filter %_mpi,$(1)),$(OBJ)/test/mpi_main.o)

$(BIN)/test_%: $$(call test_objs,$$*) $(ALL_LIBS) $(CONFIG_STAMP) $$(call mpi_main_for,$$*)
	@mkdir -p $(BIN)
	@echo "  LD   $@"
	@$(MPICXX) -o $@ $(call test_objs,$*) $(call mpi_main_for,$*) $(call link_libs,$(ALL_LIBS)) -lgtest $(if $(filter %_mpi,$*),,-lgtest_main) $(LDLIBS)

# The GPU op tests link no MPI, HDF5 or Boost, so the binary runs on a bare GPU machine. Without a GPU (or
# in a CPU-only build) every test reports itself skipped.
GPU_TEST_LIBS := $(call lib_of,nn) $(call lib_of,ops) $(call lib_of,cuda) $(call lib_of,core)
$(BIN)/test_gpu: $(GPU_TEST_OBJS) $(GPU_TEST_LIBS) $(CONFIG_STAMP)
	@mkdir -p $(BIN)
	@echo "  LD   $@"
	@$(CXX_PLAIN) -o $@ $(GPU_TEST_OBJS) $(call link_libs,$(GPU_TEST_LIBS)) -lgtest -lgtest_main $(BLAS_LIBS) $(if $(HAVE_DNNL),$(DNNL_LIBS)) -lyaml-cpp -fopenmp -pthread $(CUDA_LIBS)

ifeq ($(CONFIG)$(HAVE_FIBERS),cuda1)
# The same GPU tests with our own kernels run on the host (test/gpu/on_host, docs/testing.md): every *.cu
# is compiled by the host compiler, its launches rewritten to on_host::launch, and linked with a CUDA
# runtime on host memory instead of libcudart. The other objects are the CUDA configuration's own.
ON_HOST := $(BUILD)/on-host
ON_HOST_CU := $(wildcard kernels/*.cu src/cuda/*.cu)
ON_HOST_CU_OBJS := $(patsubst %,$(ON_HOST)/%.o,$(basename $(ON_HOST_CU)))
ON_HOST_CUH := $(patsubst %,$(ON_HOST)/%,$(wildcard kernels/*.cuh src/cuda/*.cuh))  # rewritten beside them
.SECONDARY: $(ON_HOST_CUH) $(patsubst %,$(ON_HOST)/%.cpp,$(ON_HOST_CU) $(wildcard test/gpu/on_host/*.cu))
ON_HOST_OWN_OBJS := $(patsubst %,$(ON_HOST)/%.o,$(basename $(wildcard test/gpu/on_host/*.cpp test/gpu/on_host/*.cu)))
ON_HOST_RUNTIME_OBJS := $(filter-out %_test.o,$(ON_HOST_OWN_OBJS))
ON_HOST_LIBS := $(call lib_of,nn) $(ON_HOST)/libht_ops.a $(ON_HOST)/libht_cuda.a $(call lib_of,core)
ON_HOST_CXXFLAGS = $(filter-out -MMD -MP,$(CXXFLAGS)) -MMD -MP -ffp-contract=off -Itest/gpu/on_host -fsanitize=address
# launch: name<args><<<grid, block[, shared[, stream]]>>>(  →  ::hetrain::on_host::launch("name", name, grid, ...)(
ON_HOST_LAUNCH := s/([A-Za-z_][A-Za-z0-9_:]*(<[^<>]*>)?)<<<(.*)>>>\(/::hetrain::on_host::launch("\1", \1, \3)(/

$(ON_HOST)/%.cuh: %.cuh
	@mkdir -p $(dir $@)
	@{ echo '#line 1 "$<"'; sed -E '$(ON_HOST_LAUNCH)' $<; } >$@
	@if grep -n '<<<' $@; then echo "$<: a launch the rewrite above does not handle" >&2; rm -f $@; exit 1; fi

$(ON_HOST)/%.cu.cpp: %.cu
	@mkdir -p $(dir $@)
	@{ echo '#line 1 "$<"'; sed -E '$(ON_HOST_LAUNCH)' $<; } >$@
	@if grep -n '<<<' $@; then echo "$<: a launch the rewrite above does not handle" >&2; rm -f $@; exit 1; fi

$(ON_HOST)/%.o: $(ON_HOST)/%.cu.cpp test/gpu/on_host/cuda_on_host.hpp $(ON_HOST_CUH)
	@echo "  CXX  $*.cu (on the host)"
	@$(CXX_PLAIN) $(ON_HOST_CXXFLAGS) -iquote $(dir $*) -include test/gpu/on_host/cuda_on_host.hpp -c $< -o $@

# The host cuBLAS and cuDNN check every operand against its allocation before their loops, which run too
# slowly for training when AddressSanitizer instruments them.
$(ON_HOST)/test/gpu/on_host/cublas.o $(ON_HOST)/test/gpu/on_host/cudnn.o: ON_HOST_CXXFLAGS += -fno-sanitize=address
$(ON_HOST)/%.o: %.cpp
	@mkdir -p $(dir $@)
	@echo "  CXX  $<"
	@$(CXX_PLAIN) $(ON_HOST_CXXFLAGS) -c $< -o $@

$(ON_HOST)/libht_ops.a: $(filter-out $(OBJ)/kernels/%,$(call objs_of,ops)) $(filter $(ON_HOST)/kernels/%,$(ON_HOST_CU_OBJS))
$(ON_HOST)/libht_cuda.a: $(filter-out $(patsubst %,$(OBJ)/%.o,$(basename $(wildcard src/cuda/*.cu))),$(call objs_of,cuda)) \
  $(filter $(ON_HOST)/src/%,$(ON_HOST_CU_OBJS))
$(ON_HOST)/libht_ops.a $(ON_HOST)/libht_cuda.a:
	@rm -f $@
	@ar rcs $@ $^

$(BIN)/test_gpu_on_host: $(GPU_TEST_OBJS) $(ON_HOST_OWN_OBJS) $(ON_HOST_LIBS) $(CONFIG_STAMP)
	@mkdir -p $(BIN)
	@echo "  LD   $@"
	@$(CXX_PLAIN) -fsanitize=address -o $@ $(GPU_TEST_OBJS) $(ON_HOST_OWN_OBJS) $(call link_libs,$(ON_HOST_LIBS)) -lgtest -lgtest_main $(BLAS_LIBS) $(if $(HAVE_DNNL),$(DNNL_LIBS)) -lyaml-cpp -lboost_context -fopenmp -pthread $(filter-out -lcudart,$(CUDA_LIBS))
# hetrain itself on the host runtime, for the end-to-end tests of GPU ranks (test/e2e/train_gpu_on_host.sh).
ON_HOST_ALL_LIBS := $(subst $(call lib_of,ops),$(ON_HOST)/libht_ops.a,$(subst $(call lib_of,cuda),$(ON_HOST)/libht_cuda.a,$(ALL_LIBS)))
$(ON_HOST)/hetrain: $(OBJ)/src/apps/hetrain_main.o $(ON_HOST_RUNTIME_OBJS) $(ON_HOST_ALL_LIBS) $(CONFIG_STAMP)
	@echo "  LD   $@"
	@$(MPICXX) -fsanitize=address -o $@ $< $(ON_HOST_RUNTIME_OBJS) \
	  $(call link_libs,$(ON_HOST_ALL_LIBS)) -lboost_context $(filter-out -lcudart,$(LDLIBS))
-include $(ON_HOST_CU_OBJS:.o=.d) $(ON_HOST_OWN_OBJS:.o=.d)
WHOLE_LIBS += $(ON_HOST)/libht_ops.a $(ON_HOST)/libht_cuda.a
GPU_ON_HOST := $(BIN)/test_gpu_on_host $(ON_HOST)/hetrain
else
# build/bin holds one configuration: a CPU build (or one without Boost.Context) drops the host-run GPU tests.
GPU_ON_HOST := drop-gpu-on-host
.PHONY: drop-gpu-on-host
drop-gpu-on-host:
	@rm -f $(BIN)/test_gpu_on_host
endif

# ---------------------------------------------------------------- benchmarks (bench/*.cpp → build/bin/bench_*)
BENCH_BINS := $(patsubst bench/%_bench.cpp,$(BIN)/bench_%,$(wildcard bench/*_bench.cpp))
$(BIN)/bench_%: $(OBJ)/bench/%_bench.o $(ALL_LIBS) $(CONFIG_STAMP)
	@mkdir -p $(BIN)
	@echo "  LD   $@"
	@$(MPICXX) -o $@ $< $(call link_libs,$(ALL_LIBS)) $(LDLIBS)

# ---------------------------------------------------------------- top-level targets
.PHONY: all check-deps deps test demo bench clean help gpu-check gpu-first-run gpu-bundle gpu-bundle-archive install

all: check-deps $(BIN)/hetrain $(BIN)/hetrain-pack $(TEST_BINS) $(if $(GPU_TEST_OBJS),$(BIN)/test_gpu) $(GPU_ON_HOST)

check-deps:
ifneq ($(REQUIRED_MISSING),)
	@echo "missing: $(REQUIRED_MISSING) — run 'make deps' (installs Debian packages) or set MPI_HOME/HDF5_HOME/BLAS_HOME" >&2
	@exit 1
endif

deps:
	@scripts/install-deps.sh

NPROC := $(shell nproc 2>/dev/null || echo 2)
test: check-deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@scripts/run-tests.sh

demo:
	@scripts/install-deps.sh
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@scripts/demo.sh

# GPU checks: the op parity tests (+ benchmarks when built) with results under $(OUT) (default build/gpu-check).
gpu-check: $(BIN)/test_gpu $(BIN)/bench_train_step $(BIN)/hetrain
	@scripts/gpu-check.sh $(or $(OUT),build/gpu-check)

# The first run on a GPU machine (scripts/gpu-first-run.sh): every part in at most 9 minutes, one summary.
gpu-first-run: $(BIN)/test_gpu $(BIN)/bench_train_step $(BIN)/hetrain
	@scripts/gpu-first-run.sh $(or $(OUT),build/gpu-first-run)

# A folder that carries test_gpu, the step benchmark and the shared libraries they need to a bare GPU machine.
gpu-bundle:
	@$(MAKE) --no-print-directory CUDA=1 $(BIN)/test_gpu $(BIN)/bench_train_step $(BIN)/hetrain
	@scripts/gpu-bundle.sh $(or $(DEST),build/gpu-bundle)

# The same folder as one DEST.tar.xz, to copy to a GPU machine.
gpu-bundle-archive:
	@$(MAKE) --no-print-directory CUDA=1 $(BIN)/test_gpu $(BIN)/bench_train_step $(BIN)/hetrain
	@scripts/gpu-bundle.sh --archive $(or $(DEST),build/gpu-bundle)

bench: check-deps
	@scripts/install-deps.sh --with-python
	@$(MAKE) --no-print-directory -j$(NPROC) all $(BENCH_BINS)
	@bench/run.sh

clean:
	rm -rf $(BUILD)

# ---------------------------------------------------------------- install (docs/install.md)
# make install [PREFIX=/usr/local] [DESTDIR=staging]: copies what `make` built (it never builds: the
# binaries must be there) to DESTDIR/PREFIX. Every destination folder is checked for writing before
# anything is copied, so an unwritable prefix fails with one line and installs nothing. The module file
# is removed first and written last: an install that stops half-way has none, so `module load` does not
# find it.
PREFIX ?= /usr/local
DESTDIR ?=
HT_VERSION := $(strip $(shell head -n 1 VERSION 2>/dev/null))
INSTALL_ROOT = $(DESTDIR)$(PREFIX)
INSTALL_DIRS := bin share/hetrain/jobs share/hetrain/tools share/hetrain/models share/doc/hetrain/docs share/modulefiles/hetrain
MODULE_FILE = share/modulefiles/hetrain/$(HT_VERSION).lua

install:
	@case '$(PREFIX)' in /*) ;; *) echo "make install: PREFIX must be an absolute path (got '$(PREFIX)')" >&2; exit 1;; esac
	@[ -n '$(HT_VERSION)' ] || { echo "make install: the file VERSION is missing or empty" >&2; exit 1; }
	@for f in $(BIN)/hetrain $(BIN)/hetrain-pack; do \
	  [ -x $$f ] || { echo "make install: $$f is not built: run make first" >&2; exit 1; }; done
	@for d in $(INSTALL_DIRS); do \
	  p='$(INSTALL_ROOT)'/$$d; while [ ! -e "$$p" ] && [ ! -L "$$p" ]; do p=$$(dirname "$$p"); done; \
	  if [ -d "$$p" ] && t=$$(mktemp -d "$$p/.hetrain-install.XXXXXX" 2>/dev/null); then rmdir "$$t"; else \
	    echo "make install: cannot install into $(INSTALL_ROOT): $$p is not a writable folder (nothing was installed; choose another PREFIX= or DESTDIR=)" >&2; \
	    exit 1; fi; done
	@rm -f '$(INSTALL_ROOT)/$(MODULE_FILE)'
	@install -d $(foreach d,$(INSTALL_DIRS),'$(INSTALL_ROOT)/$(d)')
	@echo "  INSTALL $(INSTALL_ROOT)/bin: hetrain hetrain-pack"
	@install -m 755 $(BIN)/hetrain $(BIN)/hetrain-pack '$(INSTALL_ROOT)/bin/'
	@echo "  INSTALL $(INSTALL_ROOT)/share/hetrain/jobs: $(notdir $(wildcard jobs/*.sbatch jobs/README.md))"
	@for f in $(wildcard jobs/*.sbatch); do install -m 755 $$f '$(INSTALL_ROOT)/share/hetrain/jobs/' || exit 1; done
	@$(if $(wildcard jobs/README.md),install -m 644 jobs/README.md '$(INSTALL_ROOT)/share/hetrain/jobs/',:)
	@echo "  INSTALL $(INSTALL_ROOT)/share/hetrain/tools: $(notdir $(wildcard data_tools/*.py))"
	@for f in $(wildcard data_tools/*.py); do \
	  if [ -x $$f ]; then m=755; else m=644; fi; install -m $$m $$f '$(INSTALL_ROOT)/share/hetrain/tools/' || exit 1; done
	@echo "  INSTALL $(INSTALL_ROOT)/share/hetrain/models: $(notdir $(wildcard models/*.yaml))"
	@install -m 644 $(wildcard models/*.yaml) '$(INSTALL_ROOT)/share/hetrain/models/'
	@echo "  INSTALL $(INSTALL_ROOT)/share/doc/hetrain: README.md, docs/$(notdir $(wildcard docs/*.md))"
	@install -m 644 README.md '$(INSTALL_ROOT)/share/doc/hetrain/'
	@install -m 644 $(wildcard docs/*.md) '$(INSTALL_ROOT)/share/doc/hetrain/docs/'
	@echo "  INSTALL $(INSTALL_ROOT)/$(MODULE_FILE)"
	@scripts/make-modulefile.sh '$(PREFIX)' '$(HT_VERSION)' >'$(INSTALL_ROOT)/$(MODULE_FILE).tmp'
	@chmod 644 '$(INSTALL_ROOT)/$(MODULE_FILE).tmp'
	@mv -f '$(INSTALL_ROOT)/$(MODULE_FILE).tmp' '$(INSTALL_ROOT)/$(MODULE_FILE)'
	@echo "installed hetrain $(HT_VERSION) ($$(cat $(CONFIG_STAMP) 2>/dev/null || echo unknown) build) into $(INSTALL_ROOT)"
	@echo "  use it: module use $(PREFIX)/share/modulefiles && module load hetrain/$(HT_VERSION)   (or PATH=$(PREFIX)/bin:\$$PATH)"

help:
	@sed -n '2,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

# Objects are named explicitly so make never treats them as intermediate files: a missing object is
# rebuilt (and archived) even when its source is older than the archive (e.g. after a file moved).
ALL_OBJS := $(foreach s,$(SUBSYSTEMS),$(call objs_of,$(s))) $(OBJ)/test/mpi_main.o $(GPU_TEST_OBJS) \
  $(foreach g,$(TEST_GROUPS),$(call test_objs,$(g))) $(OBJ)/src/apps/hetrain_main.o \
  $(patsubst %,$(OBJ)/%.o,$(basename $(wildcard data_tools/*.cpp) $(wildcard bench/*_bench.cpp)))
$(ALL_OBJS):

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
print-%:
	@echo '$*=$($*)'
