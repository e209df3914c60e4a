# llamacpp_ref.sh - sourced by the tests that run llama.cpp itself (the
# prebuilt library of the npm package @node-llama-cpp/linux-x64, driven by
# tests/ref/llama_cpp_ref.c): sets BUILD, RKMOJO, LIB and REF, exits 77
# where the package is missing (non-x86-64) and 1 where a binary is not
# built, and makes $tmp, removed on exit unless RKM_KEEP_TMP is set.
# Expects the repository root as the working directory.
BUILD=${RKM_BUILD:-${BUILD:-build}}
RKMOJO="${RKM_RUNNER:-} $BUILD/rkmojo"
LIB=tests/js/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
REF=$BUILD/tests/llama-cpp-ref
[ -f "$LIB/libllama.v0.5.0.so" ] || { echo "llama.cpp's prebuilt library missing (x86-64 only; npm install in tests/js): skipped"; exit 77; }
[ -x "$REF" ] || { echo "FAIL: $REF not built"; exit 1; }
[ -x "$BUILD/rkmojo" ] || { echo "FAIL: $BUILD/rkmojo not built"; exit 1; }
tmp=$(mktemp -d)
trap '[ -n "${RKM_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
