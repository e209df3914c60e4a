# models.sh - sourced by the tests that synthesize, quantize (llama.cpp)
# or convert models: each model is made once per build of the binaries
# that make it and shared by every test and every run that asks for the
# same one, in $RKM_TEST_MODELS (tests/run.sh: $BUILD/test-models).
#
#   g=$(model_synth ARGS...)             rkmojo synth ARGS -o G --quiet
#   g=$(model_ref SRC quantize MIX)      llama.cpp's quantizer (llama-cpp-ref)
#   g=$(model_ref SRC experts TYPE)      ... the routed experts in a grid type
#   d=$(model_convert SRC ARGS...)       rkmojo convert SRC D ARGS --quiet
#
# Each prints the model's path, or fails (its error on stderr) leaving
# nothing behind. A model is keyed by the command, the binary that makes
# it (its checksum) and each input file (a model of this cache by its
# path, any other file by path, size and modification time), so a change
# of the code or of an input makes a new one. Concurrent tests wait for
# one another on a per-model lock (flock). The models are read-only for
# their users: a test that changes a model copies it into its own $tmp.
# Models unused for two days are removed by tests/run.sh.
# Expects RKMOJO (and, for model_ref, REF and LIB) to be set, as
# tests/common/llamacpp_ref.sh sets them.
RKM_TEST_MODELS=${RKM_TEST_MODELS:-${RKM_BUILD:-${BUILD:-build}}/test-models}
mkdir -p "$RKM_TEST_MODELS"

# model__id FILE: what identifies an input
model__id() {
  case $1 in
    "$RKM_TEST_MODELS"/*) echo "$1" ;;
    *) stat -L -c '%n %s %y' "$1" 2>/dev/null || echo "$1" ;;
  esac
}

# model__bin PATH: the checksum of a binary
model__bin() { sha1sum <"$1" | cut -c1-16; }

# model__make KIND EXT KEYTEXT CMD...: CMD writes @OUT@ (the word @OUT@
# in CMD is replaced by a temporary path, renamed to the model's path when
# CMD succeeds)
model__make() {
  local kind=$1 ext=$2 keytext=$3 key out part rc args=() a lock
  shift 3
  key=$(printf '%s\n' "$keytext" | sha1sum | cut -c1-20)
  out=$RKM_TEST_MODELS/$kind-$key$ext
  exec {lock}>"$out.lock"
  flock "$lock"
  if [ ! -e "$out" ]; then
    part=$out.part.$$
    rm -rf "$part"
    for a in "$@"; do [ "$a" = @OUT@ ] && args+=("$part") || args+=("$a"); done
    "${args[@]}" >&2
    rc=$?
    if [ $rc -ne 0 ] || [ ! -e "$part" ]; then
      rm -rf "$part"; exec {lock}>&-
      return $((rc ? rc : 1))
    fi
    mv "$part" "$out"
  else
    touch -c "$out" # used: kept by tests/run.sh's clean-up
  fi
  exec {lock}>&-
  echo "$out"
}

model_synth() {
  local bin=${RKMOJO##* } keytext a prev=
  keytext="synth $(model__bin "$bin")"
  for a in "$@"; do
    [ "$prev" = --vocab-from ] && a=$(model__id "$a")
    keytext="$keytext|$a"; prev=$a
  done
  # shellcheck disable=SC2086  # $RKMOJO is a runner and a path
  model__make synth .gguf "$keytext" $RKMOJO synth "$@" -o @OUT@ --quiet
}

model_ref() {
  local src=$1 mode=$2 what=$3
  model__make "ref-$mode" .gguf "ref $(model__bin "$REF") $(model__id "$LIB/libllama.v0.5.0.so")|$(model__id "$src")|$mode|$what" \
    "$REF" "$LIB" "$src" "$mode" @OUT@ "$what"
}

model_convert() {
  local src=$1 bin=${RKMOJO##* } keytext
  shift
  keytext="convert $(model__bin "$bin")|$(model__id "$src")|$*"
  # shellcheck disable=SC2086  # $RKMOJO is a runner and a path
  model__make convert .rkmojo "$keytext" $RKMOJO convert "$src" @OUT@ "$@" --quiet
}

# o=$(model_ref_out SRC MODE ARGS...): what llama-cpp-ref prints in MODE
# (ids, meta, ...) for SRC, kept as a text file
model_ref_out() {
  local src=$1
  shift
  model__make "ref-out" .txt "ref-out $(model__bin "$REF") $(model__id "$LIB/libllama.v0.5.0.so")|$(model__id "$src")|$*" \
    bash -c '"${@:2}" >"$1"' _ @OUT@ "$REF" "$LIB" "$src" "$@"
}
