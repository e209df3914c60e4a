# rkmojo build. One Makefile, objects under $(BUILD), dependency files via
# -MMD -MP. Layers are folders of src/; every .c under them goes into
# librkmojo.a, except the per-ISA kernels, which are built only for their
# architecture, each with its own flags (no -march=native: one binary runs
# on any x86-64 / ARMv8 and picks its kernels at start-up).
#
#   make              build/rkmojo and the library
#   make test         build and run every tests/test-*.c (plus scripted tests)
#   make asan         the tests under AddressSanitizer + UBSan (build-asan/)
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
LDLIBS  += -lcjson -lm

LAYERS  := util format kernels runtime text server backend
LIB_SRC := $(foreach d,$(LAYERS),$(wildcard src/$(d)/*.c))
ifeq ($(ARCH),x86_64)
LIB_SRC += $(wildcard src/kernels/arch/x86/*.c)
LDLIBS  += -lmicrohttpd
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

.PHONY: all test asan cross test-arm fuzz clean format bench
all: $(BUILD)/rkmojo $(TEST_BIN) $(FUZZ_REPLAY)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISAFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/rkmojo: $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_COMMON_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Each fuzz target linked with a plain main that replays the kept corpus
# and crashers (tests/test-fuzz-replay.sh runs them).
$(BUILD)/fuzz-replay/%: $(BUILD)/fuzz/%.o $(BUILD)/fuzz/replay.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

test: all
	BUILD=$(BUILD) tests/run.sh

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

cross:
	$(MAKE) BUILD=build-arm CC=aarch64-linux-gnu-gcc ARCH=aarch64 all

test-arm: cross
	BUILD=build-arm RKM_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" RKM_TEST_SET=arm tests/run.sh

fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 SAN="-fsanitize=fuzzer-no-link,address,undefined" build-fuzz/librkmojo.a
	@mkdir -p build-fuzz/fuzz
	for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  clang -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
	    $$f build-fuzz/librkmojo.a -lcjson -lm -lmicrohttpd -pthread -o build-fuzz/fuzz/$$n || exit 1; done

bench: $(BUILD)/rkmojo
	bench/run.sh

format:
	clang-format -i $(LIB_SRC) $(CLI_SRC) $(TEST_SRC)

clean:
	rm -rf build build-asan build-arm build-fuzz

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_BIN:=.d) $(TEST_COMMON_OBJ:.o=.d)
