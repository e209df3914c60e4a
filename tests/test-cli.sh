#!/usr/bin/env bash
# test-cli.sh - the command-line options as a user types them, on a tiny
# synthetic model: --name=V and --name V, -nV and -n V, a flag bundled with
# an option (-qn3), unambiguous prefixes of long names, aliases (--ctx-size,
# --ctx, -c; --temperature), -- ending the options, positional arguments
# before or after options; -h/--help on every subcommand (usage on stdout,
# status 0); unknown options, missing and bad values (one message on
# stderr, status 2); a runtime failure (status 1); --trace-out writing the
# trace that trace-sim reads.
set -u
B=${RKM_BUILD:-build}
R="${RKM_RUNNER:-} $B/rkmojo"
[ -x "$B/rkmojo" ] || { echo "$B/rkmojo not built: skipped"; exit 77; }
T=$(mktemp -d -p "${TMPDIR:-/var/tmp}")
trap 'rm -rf "$T"' EXIT
unset RKM_TRACE_OUT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# expect STATUS MESSAGE ARGS...: exit status STATUS, MESSAGE on stderr
expect() {
  local want=$1 msg=$2; shift 2
  $R "$@" > "$T/out" 2> "$T/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then fail "$* -> status $rc, want $want: $(head -c 300 "$T/err")"
  elif ! grep -qF -- "$msg" "$T/err"; then fail "$* -> message '$(head -c 300 "$T/err")', want '$msg'"
  else ok "$* -> $want, '$msg'"; fi
}

$R synth --preset tiny -o "$T/a.gguf" --seed 3 --quiet || { echo "FAIL: synth"; exit 1; }
# positional arguments around the options
$R convert --quiet "$T/a.gguf" --quant=q8_0 "$T/m" || { echo "FAIL: convert"; exit 1; }
M=$T/m

# the same greedy generation whatever form the options take
gen() { $R run -m "$M" -p "Once upon a time" "$@" 2> "$T/gen.err"; }
ref=$(gen --temp=0 -n3 -q)
[ -n "$ref" ] && ok "run --temp=0 -n3 generates" || fail "run --temp=0 -n3: $(cat "$T/gen.err")"
for form in "--temp 0 -n 3 -q" "--temperature=0 --n-predict=3 --quiet" "--te 0 --n-pr 3 --qui" "-qn3 --temp 0" \
            "-qn 3 --temp=0" "--temp 0 -n 3 -q -t 1" "--temp 0 -n 3 -q --seed=5 --top-k=1"; do
  # shellcheck disable=SC2086
  got=$(gen $form)
  [ "$got" = "$ref" ] && ok "run $form: same text" || fail "run $form: '$got' vs '$ref' ($(cat "$T/gen.err"))"
done
# sampling with a fixed seed: the value forms give the same text
s1=$(gen --temp=1 --seed=7 -n4 -q)
s2=$(gen --temp 1 --seed 7 -n 4 -q)
[ "$s1" = "$s2" ] && ok "--seed=7 as --seed 7" || fail "seeded: '$s1' vs '$s2'"
# -- ends the options: what follows is an argument, and run takes none
expect 2 "unexpected argument '-n'" run -m "$M" -p hi -- -n 3

# --ctx-size is -c and --ctx: perplexity scores in windows of the context
ids=$(seq -s, 1 10)
for form in "--ctx-size 4" "--ctx-size=4" "--ctx 4" "-c4" "-c 4" "--ctx-s 4"; do
  # shellcheck disable=SC2086
  out=$($R perplexity -m "$M" --ids "$ids" -q $form 2>&1)
  echo "$out" | grep -q "over 7 predictions" && ok "perplexity $form: windows of 4" || fail "perplexity $form: $out"
done
$R perplexity -m "$M" --ids "$ids" -q 2>&1 | grep -q "over 9 predictions" && ok "perplexity: one window by default" \
  || fail "perplexity default context"
$R bench -m "$M" --prompt-tokens 4 -n 2 -t 1 --ctx-size 64 --mem-budget 50M > "$T/out" 2> "$T/err" \
  && grep -q "kv 64.00 KiB" "$T/out" && ok "bench --ctx-size plans the budget" || fail "bench --ctx-size: $(cat "$T/err")"

# usage errors: status 2 and one message naming the command and the option
expect 2 "rkmojo run: --temp: '-1' is out of range [0, 100]" run -m "$M" -p hi --temp -1
expect 2 "rkmojo run: --temp: '-1' is out of range [0, 100]" run -m "$M" -p hi --temp=-1
expect 2 "rkmojo run: --temp: 'warm' is not a number" run -m "$M" -p hi --temp warm
expect 2 "rkmojo run: --n-predict: '3x' is not an integer" run -m "$M" -p hi -n3x
expect 2 "rkmojo run: unknown option '--foo' (see rkmojo run --help)" run -m "$M" -p hi --foo
expect 2 "rkmojo run: unknown option '--foo' (see rkmojo run --help)" run -m "$M" -p hi --foo=1
expect 2 "rkmojo run: unknown option '-x'" run -m "$M" -p hi -x
expect 2 "rkmojo run: --prompt needs a value" run -m "$M" --prompt
expect 2 "rkmojo run: --quiet takes no value" run -m "$M" -p hi --quiet=1
expect 2 "rkmojo run: option '--pr' is ambiguous" run -m "$M" --pr hi
expect 2 "rkmojo run: give exactly one of -p, -f, --prompt-ids" run -m "$M"
expect 2 "rkmojo bench: --mem-budget: 'lots' is not a size" bench -m "$M" --mem-budget lots
expect 2 "rkmojo bench: --cache-policy: 'mru' is not one of lfu|lru" bench -m "$M" --cache-policy mru
expect 2 "rkmojo serve: --port: '70000' is out of range [0, 65535]" serve -m "$M" --port 70000
expect 2 "rkmojo serve: --idle-unload: 'soon' is not a duration" serve -m "$M" --idle-unload soon
expect 2 "rkmojo synth: --dtype: 'f8' is not a weight type (f32, f16, bf16, q8_0, q4_0) or a mix (q2_k," synth -o "$T/x.gguf" --dtype f8
expect 2 "rkmojo synth: --dtype: 'keep' is not a weight type" synth -o "$T/x.gguf" --dtype keep
expect 1 "rkmojo synth: --hf-out needs --dtype f32, f16 or bf16" synth -o "$T/x.gguf" --dtype q4_k_m --hf-out "$T/xhf"
[ ! -e "$T/x.gguf" ] && [ ! -e "$T/xhf" ] && ok "synth writes nothing when refused" || fail "a refused synth wrote files"
expect 2 "rkmojo trace-sim: --slots: '0,8' is not a list of positive integers" trace-sim "$T/t.bin" --slots 0,8
expect 2 "rkmojo convert: needs INPUT and OUT.rkmojo" convert "$T/a.gguf"
expect 2 "rkmojo convert: unexpected argument" convert "$T/a.gguf" "$T/m2" "$T/m3"
expect 2 "rkmojo doctor: --min-time: 'x' is not a number" doctor --bench --min-time x
# a runtime failure is status 1
expect 1 "cannot open" run -m "$T/none" -p hi

# every subcommand: --help and -h print the usage on stdout, status 0; an
# unknown option is status 2
for c in synth convert inspect tokenize detokenize run perplexity chat demo bench trace-sim template serve doctor ps; do
  for h in --help -h; do
    if $R $c $h > "$T/out" 2> "$T/err" && [ ! -s "$T/err" ] && grep -q "^usage: rkmojo $c" "$T/out"; then :
    else fail "$c $h: $(head -c 200 "$T/out" "$T/err")"; fi
  done
  grep -q -- "-h, --help" "$T/out" && ok "$c --help" || fail "$c --help lists no options"
  expect 2 "rkmojo $c: unknown option '--no-such-option'" $c --no-such-option
done

# options and positional arguments in any order
$R inspect --verify "$M" > "$T/i1" && $R inspect "$M" --verify > "$T/i2" && cmp -s "$T/i1" "$T/i2" \
  && grep -q "verify: *ok" "$T/i1" && ok "inspect --verify before or after the model" || fail "inspect --verify order"
a=$($R tokenize -m "$M" --ids "hello world")
b=$($R tokenize "hello world" --ids -m "$M")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "tokenize TEXT before or after the options" || fail "tokenize order: '$a' vs '$b'"
# after --, an argument may start with '-'
c=$($R tokenize -m "$M" --ids -- "-n 3")
d=$(printf '%s' "-n 3" | $R tokenize -m "$M" --ids -)
[ -n "$c" ] && [ "$c" = "$d" ] && ok "tokenize -- '-n 3'" || fail "tokenize after --: '$c' vs '$d'"
t1=$($R detokenize -m "$M" $a)
t2=$($R detokenize $a --model="$M")
[ "$t1" = "$t2" ] && [ -n "$t1" ] && ok "detokenize IDs around the options" || fail "detokenize: '$t1' vs '$t2'"

# --trace-out records the routing to the file named (no environment needed)
if $R run -m "$M" -p "Once upon a time" --temp 0 -n 2 -q --trace-out "$T/t.bin" > /dev/null 2> "$T/err" && [ -s "$T/t.bin" ]; then
  $R trace-sim --slots=2,4 "$T/t.bin" --json > "$T/sim.json" 2> "$T/err" && grep -q '"slots"' "$T/sim.json" \
    && ok "--trace-out writes what trace-sim reads" || fail "trace-sim: $(cat "$T/err")"
else
  fail "run --trace-out: $(cat "$T/err")"
fi

# chat: commands never reach the model, multi-line messages, /save and
# /load; a conversation file that is not one is refused, nothing lost
printf '%s\n' '/set temperature 0' '/set num_predict 3' '/set system Be brief.' 'hello' '/bogus' '"""' 'line one' 'line two' '"""' \
  'a \' 'b' '/save '"$T/c.json" '/load '"$T/a.gguf" '/show' '/clear' '/show' '/load '"$T/c.json" '/show' '/bye' 'never sent' |
  $R chat -m "$M" -q > "$T/chat.out" 2> "$T/chat.err"
users=$(node -e 'const m=JSON.parse(require("fs").readFileSync(process.argv[1])).messages;console.log(JSON.stringify([m[0].role,m[0].content,m.filter(x=>x.role=="user").map(x=>x.content),m.filter(x=>x.role=="assistant").length]))' "$T/c.json" 2>&1)
[ "$users" = '["system","Be brief.",["hello","line one\nline two","a \nb"],3]' ] && ok "chat: commands not sent, multi-line messages saved" || fail "chat /save: $users"
grep -q "unknown command /bogus" "$T/chat.err" && grep -q "not a conversation" "$T/chat.err" && ok "chat: an unknown command and a bad /load file are refused" \
  || fail "chat messages: $(cat "$T/chat.err")"
[ "$(grep -c '^conversation: 3 turns' "$T/chat.out")" = 2 ] && grep -q '^conversation: 0 turns' "$T/chat.out" && grep -q '^temperature 0,' "$T/chat.out" \
  && ok "chat: /clear forgets, /load restores, /set applies" || fail "chat /show: $(cat "$T/chat.out")"
# on a terminal: libedit's line editing, history kept in ~/.rkmojo/history
if command -v script > /dev/null; then
  mkdir -p "$T/home"
  printf 'hello\n/bye\n' | HOME=$T/home timeout 120 script -qec "$R chat -m $M -n 2 --temp 0 -q" /dev/null > "$T/tty.out" 2>&1
  grep -q '^hello$' "$T/home/.rkmojo/history" 2> /dev/null && grep -q '>>> ' "$T/tty.out" \
    && ok "chat on a terminal: prompt and history file" || fail "chat tty: $(head -c 300 "$T/tty.out")"
fi
expect 1 "rkmojo chat: no server at http://127.0.0.1:1" chat --url 127.0.0.1:1
expect 1 "rkmojo ps: no server at http://127.0.0.1:1" ps --url http://127.0.0.1:1/

# demo parses its options, then runs synth and convert in the same process
# (a small shape here: the default is ~2 GB), generates under its budget and
# says what happened; a second run reuses the converted model
$R demo --dir "$T/demo" --preset tiny --layers all --mem-budget 64M -n2 --temp=0 > "$T/out" 2> "$T/err" &&
  grep -q "The text above is noise" "$T/out" && grep -q "memory budget      64.00 MiB" "$T/out" &&
  grep -q "expert-cache hit rate" "$T/out" && grep -q "per generated token" "$T/out" && ! grep -q "reserved_" "$T/out" \
  && ok "demo runs synth and convert after its own options" || fail "demo: $(tail -3 "$T/err") $(tail -5 "$T/out")"
$R demo --dir "$T/demo" --preset tiny --layers all --mem-budget 64M -n2 --temp=0 > "$T/out" 2> "$T/err" &&
  grep -q "holds the converted model from an earlier run" "$T/out" && ! grep -q "^== 2" "$T/out" \
  && ok "demo reuses the converted model" || fail "demo rerun: $(tail -3 "$T/err")"
$R synth --preset tiny --set n_vocab=100 -o "$T/v.gguf" --quiet 2> "$T/err"; grep -q "the built-in vocabulary takes 260" "$T/err" \
  && ok "synth: n_vocab out of range refused" || fail "synth n_vocab: $(cat "$T/err")"

# the knob registry: doctor --env shows every knob with the value in force,
# never the API key; a bad model knob is refused with a message naming it
RKM_KERNELS=ref RKMOJO_API_KEY=s3cret $R doctor --env > "$T/env" 2> "$T/err"
if grep -qE '^RKM_KERNELS +process +ref ' "$T/env" && grep -qE '^RKM_VERIFY +model +\(unset\)' "$T/env" &&
   grep -q 'RKMOJO_API_KEY' "$T/env" && ! grep -q s3cret "$T/env"; then ok "doctor --env"
else fail "doctor --env: $(head -c 300 "$T/env")"; fi
RKM_VERIFY=sometimes $R run -m "$M" -p "x" -n 1 -q > /dev/null 2> "$T/err"
rc=$?
[ $rc -ne 0 ] && grep -q "RKM_VERIFY must be one of always, first, never (got 'sometimes')" "$T/err" \
  && ok "a bad model knob is refused" || fail "RKM_VERIFY=sometimes -> $rc: $(cat "$T/err")"
a1=$(RKM_VERIFY=never RKM_IO_BACKEND=pread RKM_PACK=0 gen --temp=0 -n3 -q)
[ "$a1" = "$ref" ] && ok "model knobs applied, output unchanged" || fail "knobs changed the output: '$a1' vs '$ref'"

# the model's recommended sampling (generation_config.json) is the default
# of run; a flag the user gives wins over it
$R synth --preset tiny -o "$T/g.gguf" --hf-out "$T/ghf" --seed 3 --quiet || fail "synth --hf-out"
echo '{"do_sample": false}' > "$T/ghf/generation_config.json"
$R convert --quiet "$T/ghf" "$T/greedy" || fail "convert with generation_config.json"
g1=$($R run -m "$T/greedy" -p "Once upon a time" -n 8 -q --seed 1 2>/dev/null)
g2=$($R run -m "$T/greedy" -p "Once upon a time" -n 8 -q --seed 2 2>/dev/null)
g0=$($R run -m "$T/greedy" -p "Once upon a time" -n 8 -q --temp 0 2>/dev/null)
[ -n "$g1" ] && [ "$g1" = "$g2" ] && [ "$g1" = "$g0" ] && ok "the model's greedy recommendation is run's default" \
  || fail "recommended greedy: '$g1' / '$g2' / '$g0'"
s1=$($R run -m "$T/greedy" -p "Once upon a time" -n 8 -q --seed 1 --temp 1.5 2>/dev/null)
s2=$($R run -m "$T/greedy" -p "Once upon a time" -n 8 -q --seed 2 --temp 1.5 2>/dev/null)
[ "$s1" != "$s2" ] && ok "--temp overrides the model's recommendation" || fail "--temp 1.5 ignored: '$s1' = '$s2'"

# list / show / rm over a models directory
mkdir -p "$T/models"
$R synth --preset tiny -o "$T/lm.gguf" --quiet && $R convert "$T/lm.gguf" "$T/models/alpha.rkmojo" --quiet &&
  $R convert "$T/lm.gguf" "$T/models/beta.rkmojo" --quant q4_0 --quiet || fail "models for list"
out=$($R list --models-dir "$T/models" 2>&1)
echo "$out" | grep -q "^alpha .*qwen3moe .*q8_0" && echo "$out" | grep -q "^beta .*q4_0" \
  && ok "list: both models with architecture and quantization" || fail "list: $out"
out=$(RKMOJO_MODELS="$T/models" $R show beta 2>&1)
echo "$out" | grep -q "architecture *qwen3moe" && echo "$out" | grep -q "quantization *q4_0" && echo "$out" | grep -q "experts *8, 2 per token" \
  && ok "show (from \$RKMOJO_MODELS)" || fail "show: $out"
expect 1 "model 'ghost' not found" show ghost --models-dir "$T/models"
expect 2 "is not a model name" rm ../alpha --models-dir "$T/models"
expect 2 "give the model's name" rm --models-dir "$T/models"
expect 1 "is not a directory" list --models-dir "$T/nowhere"
$R rm beta --models-dir "$T/models" >/dev/null && [ ! -e "$T/models/beta.rkmojo" ] && [ -d "$T/models/alpha.rkmojo" ] &&
  ! $R list --models-dir "$T/models" | grep -q "^beta" && ok "rm deletes the model, and only it" || fail "rm"

echo "$fails failed"
[ "$fails" -eq 0 ]
