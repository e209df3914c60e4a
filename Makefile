# rkmojo build. One Makefile, objects under $(BUILD), dependency files via
# -MMD -MP. Layers are folders of src/; every .c under them goes into
# librkmojo.a, except the per-ISA kernels, which are built only for their
# architecture, each with its own flags (no -march=native: one binary runs
# on any x86-64 / ARMv8 and picks its kernels at start-up).
# tests/tiers says which test runs in which tier and set.
#
#   make              build/rkmojo and the library
#   make check        the quick tier (< 3 min): run it before each commit
#   make test         every test, as CI runs them (tests/tiers, tests/run.sh)
#   make test-full    every test with the long matrices (the full tier)
#   make asan         the tests of the asan set under AddressSanitizer + UBSan (build-asan/)
#   make ubsan        the fuzz corpora under clang's UBSan (build-ubsan/)
#   make cross        aarch64 build with gcc-aarch64-linux-gnu (build-arm/)
#   make test-arm     the unit tests under qemu-aarch64
#   make fuzz         libFuzzer targets with clang (build-fuzz/)
#   WERROR=1          warnings are errors (CI)

CC      ?= cc
BUILD   ?= build
ARCH    ?= $(shell $(CC) -dumpmachine | cut -d- -f1)
OPT     ?= -O2
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN    += -Werror
endif
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) -g -D_GNU_SOURCE -Iinclude -Isrc $(WARN) -pthread \
           -fno-strict-aliasing $(SAN)
LDFLAGS += $(SAN) -pthread
# io_uring (Debian's liburing) for the expert reads; the engine falls back
# to its pread pool where the kernel refuses io_uring.
# PCRE2 (Debian's libpcre2-8, with its JIT) runs the pre-tokenizer regexes.
CFLAGS  += -DRKM_HAVE_URING -DRKM_HAVE_MHD=1 -DPCRE2_CODE_UNIT_WIDTH=8
# libpng, libjpeg-turbo and libwebp decode the images the vision encoders take.
LDLIBS  += -lcjson -lmicrohttpd -luring -lpcre2-8 -lcurl -lpng -ljpeg -lwebp -lm

LAYERS  := util kernels format text convert backend runtime server
LIB_SRC := $(foreach d,$(LAYERS),$(wildcard src/$(d)/*.c))
ifeq ($(ARCH),x86_64)
LIB_SRC += $(wildcard src/kernels/arch/x86/*.c) $(wildcard src/util/x86/*.c)
endif
ifeq ($(ARCH),aarch64)
LIB_SRC += $(wildcard src/kernels/arch/arm/*.c)
endif
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/test-*.c)
TEST_COMMON := $(wildcard tests/common/*.c)

FUZZ_SRC := $(wildcard fuzz/fuzz-*.c)
FUZZ_REPLAY := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz-replay/%)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_COMMON_OBJ := $(TEST_COMMON:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/librkmojo.a

# Per-ISA flags, by file-name suffix.
$(BUILD)/%_avx2.o:    ISAFLAGS := -mavx2 -mfma -mf16c
$(BUILD)/%_avx512.o:  ISAFLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c
$(BUILD)/%_avx512vnni.o: ISAFLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c
$(BUILD)/%_avxvnni.o: ISAFLAGS := -mavxvnni -mavx2 -mfma -mf16c
$(BUILD)/%_dotprod.o: ISAFLAGS := -march=armv8.2-a+dotprod+fp16

.PHONY: all check test test-full asan ubsan cross test-arm fuzz clean format bench bench-bin
all: $(BUILD)/rkmojo $(TEST_BIN) $(FUZZ_REPLAY)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISAFLAGS) -MMD -MP -c $< -o $@

# the chat page is included by the assembler (.incbin), which -MMD does not see
$(BUILD)/src/server/webui.o: src/server/webui.html

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# The CLI alone links libedit (chat's line editing); libcurl is the library's (pull) and the CLI's (chat --url, ps).
CLI_LIBS := -ledit
$(BUILD)/rkmojo: $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLI_LIBS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_COMMON_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# test-faults interposes the allocator and the file I/O calls of the library
# (tests/test-faults.c) by wrapping them at link time.
comma := ,
FAULT_WRAP := $(addprefix -Wl$(comma)--wrap=,malloc calloc realloc free strdup strndup posix_memalign \
  mmap munmap open pread pwrite fsync rename)
$(BUILD)/tests/test-faults: LDFLAGS += $(FAULT_WRAP)

# Emulated librknnrt.so for the NPU backend's tests (tests/rknn/README.md):
# a plain shared library from tests/rknn/*.c that tests dlopen through
# RKM_RKNN_LIB. It links nothing of librkmojo and is built without $(SAN)
# (a sanitized .so would need the runtime preloaded into every dlopen-er).
RKNN_EMU := $(BUILD)/tests/librknnrt.so
all: $(RKNN_EMU)
$(RKNN_EMU): $(wildcard tests/rknn/*.c tests/rknn/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -D_GNU_SOURCE $(WARN) -fPIC -shared -fvisibility=hidden -pthread \
	  -o $@ $(filter %.c,$^) -lm

# llama.cpp as a reference (tests/ref/llama_cpp_ref.c): dlopens the
# prebuilt libllama of tests/js's npm packages; links nothing of librkmojo
# and is built without $(SAN) (the library it loads is not sanitized).
LLAMA_CPP_REF := $(BUILD)/tests/llama-cpp-ref
all: $(LLAMA_CPP_REF)
$(LLAMA_CPP_REF): tests/ref/llama_cpp_ref.c tests/ref/ref_common.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -D_GNU_SOURCE $(WARN) -o $@ $< -ldl -lm

# llama.cpp's multimodal library as a reference (tests/ref/mtmd_ref.c):
# dlopens the prebuilt binding of tests/js's npm packages.
MTMD_REF := $(BUILD)/tests/mtmd-ref
all: $(MTMD_REF)
$(MTMD_REF): tests/ref/mtmd_ref.c tests/ref/ref_common.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -D_GNU_SOURCE $(WARN) -o $@ $< -ldl

# float32 .npy arrays compared by cosine (tests/ref/npy_cmp.c)
NPY_CMP := $(BUILD)/tests/npy-cmp
all: $(NPY_CMP)
$(NPY_CMP): tests/ref/npy_cmp.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -D_GNU_SOURCE $(WARN) -o $@ $< -lm

# deterministic PNG / JPEG / WebP test images (tests/ref/make_image.c)
MAKE_IMAGE := $(BUILD)/tests/make-image
all: $(MAKE_IMAGE)
$(MAKE_IMAGE): tests/ref/make_image.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -D_GNU_SOURCE $(WARN) -o $@ $< -lpng -ljpeg -lwebp -lm

# Each fuzz target linked with a plain main that replays the kept corpus
# and crashers (tests/test-fuzz-replay.sh runs them).
$(BUILD)/fuzz-replay/%: $(BUILD)/fuzz/%.o $(BUILD)/fuzz/replay.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

check: all
	BUILD=$(BUILD) RKM_TEST_TIER=quick tests/run.sh

test: all
	BUILD=$(BUILD) tests/run.sh

test-full: all
	BUILD=$(BUILD) RKM_TEST_TIER=full tests/run.sh

# GCC's "undefined" leaves out float-cast-overflow: named here; nothing recovers.
ASAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="$(ASAN_FLAGS)" all
	BUILD=build-asan RKM_TEST_SET=asan tests/run.sh

# Debian's cross gcc finds multiarch libraries (libcjson:arm64 in
# /usr/lib/aarch64-linux-gnu) by itself. qemu runs with -cpu max so both
# NEON kernel sets (plain and sdot) run; the arm column of tests/tiers names the tests
# it runs (keep it short: qemu is slow).
ARM_CC ?= aarch64-linux-gnu-gcc
cross:
	$(MAKE) BUILD=build-arm CC=$(ARM_CC) ARCH=aarch64 all bench-bin

# The loader and libc must come from the same package: with multiarch
# libc6:arm64 installed (it comes with libcjson:arm64), /usr/aarch64-linux-gnu's
# older ld.so would load the newer multiarch libc.so.6 and hang in
# pthread_create, so qemu's prefix is then / (multiarch only).
ARM_QEMU_PREFIX ?= $(if $(wildcard /lib/ld-linux-aarch64.so.1),/,/usr/aarch64-linux-gnu)
test-arm: cross
	BUILD=build-arm RKM_RUNNER="qemu-aarch64 -cpu max -L $(ARM_QEMU_PREFIX)" RKM_TEST_SET=arm tests/run.sh

# The fuzz corpora replayed under clang's UBSan (float-cast-overflow and
# the rest, nothing recovered): what GCC's sanitizers do not see.
UBSAN_FLAGS := -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all
ubsan:
	$(MAKE) BUILD=build-ubsan CC=clang OPT=-O1 SAN="$(UBSAN_FLAGS)" $(FUZZ_SRC:fuzz/%.c=build-ubsan/fuzz-replay/%)
	RKM_BUILD=build-ubsan bash tests/test-fuzz-replay.sh

# Benchmark binaries (bench/bench-*.c), not run by the tests.
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/bench-*.c))
bench-bin: $(BENCH_BIN)
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 SAN="-fsanitize=fuzzer-no-link,address,undefined,float-cast-overflow -fno-sanitize-recover=all" build-fuzz/librkmojo.a
	@mkdir -p build-fuzz/fuzz
	for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  clang -std=c11 -O1 -g -D_GNU_SOURCE -DPCRE2_CODE_UNIT_WIDTH=8 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined,float-cast-overflow -fno-sanitize-recover=all \
	    $$f build-fuzz/librkmojo.a $(LDLIBS) -pthread -o build-fuzz/fuzz/$$n || exit 1; done

bench: $(BUILD)/rkmojo
	bench/run.sh

format:
	clang-format -i $(LIB_SRC) $(CLI_SRC) $(TEST_SRC)

clean:
	rm -rf build build-asan build-arm build-fuzz build-ubsan

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_BIN:=.d) $(TEST_COMMON_OBJ:.o=.d)
