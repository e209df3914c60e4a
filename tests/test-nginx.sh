#!/usr/bin/env bash
# test-nginx.sh - several `rkmojo serve` instances behind nginx with the
# recipe as shipped (docs/nginx-rkmojo.conf, its ports replaced by free
# loopback ones): three servers, conversations of two turns each through
# nginx (keyed by their first messages, and one by X-Conversation-Id);
#   - every second turn finds its first turn's KV (cached tokens > 0): the
#     conversation came back to its instance
#   - the conversations spread over more than one instance
#   - one instance killed: every request of the next turns still answers
#     200, the conversations of the live instances keep their cache hits,
#     those of the dead one start again elsewhere and hit from then on
# Exit 0 pass, 1 fail, 77 skip. No timed assertions.
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-build}
BIN=$PWD/$BUILD/rkmojo
skip() { echo "skip: $1"; exit 77; }
[ -x "$BIN" ] || skip "no $BIN"
[ -z "${RKM_RUNNER:-}" ] || skip "server tests run natively only"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || skip "nginx missing (scripts/setup.sh installs it)"
command -v curl >/dev/null || skip "curl missing"
command -v node >/dev/null || skip "node missing"

T=$(mktemp -d)
PIDS=()
NGX_PID=""
cleanup() {
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

. tests/common/check.sh
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

"$BIN" synth --preset tiny -o "$T/t.gguf" --quiet >"$T/synth.log" 2>&1 || { cat "$T/synth.log"; exit 1; }
"$BIN" convert "$T/t.gguf" "$T/tiny.rkmojo" --quiet >"$T/convert.log" 2>&1 || { cat "$T/convert.log"; exit 1; }
if "$BIN" serve -m "$T/tiny.rkmojo" --port 0 --host 256.0.0.1 2>&1 | grep -q "no HTTP server"; then
  skip "this build has no HTTP server"
fi

# three instances on free ports
SP=()
for i in 0 1 2; do
  rm -f "$T/s$i.port"
  "$BIN" serve -m "$T/tiny.rkmojo" --ctx 256 --port 0 --port-file "$T/s$i.port" --trusted-proxy 127.0.0.1 \
    >"$T/s$i.log" 2>&1 &
  SPID[$i]=$!
  PIDS+=("${SPID[$i]}")
done
for i in 0 1 2; do
  for _ in $(seq 300); do [ -s "$T/s$i.port" ] && break; sleep 0.1; done
  [ -s "$T/s$i.port" ] || { echo "server $i did not start:"; cat "$T/s$i.log"; exit 1; }
  SP[$i]=$(cat "$T/s$i.port")
done

# the recipe, with these ports, its logs and pid under $T
NP=$(free_port)
mkdir -p "$T/ngx/logs"
{
  echo "worker_processes 1; pid $T/ngx/nginx.pid; error_log $T/ngx/logs/error.log;"
  echo "events { worker_connections 256; }"
  echo "http { log_format rk \"\$upstream_addr \$request_length\"; access_log $T/ngx/logs/access.log rk; client_body_temp_path $T/ngx/body; proxy_temp_path $T/ngx/proxy;"
  sed -e "s/127\.0\.0\.1:8081/127.0.0.1:${SP[0]}/; s/127\.0\.0\.1:8082/127.0.0.1:${SP[1]}/; s/127\.0\.0\.1:8083/127.0.0.1:${SP[2]}/" \
      -e "s/listen 127\.0\.0\.1:8080;/listen 127.0.0.1:$NP;/" docs/nginx-rkmojo.conf
  echo "}"
} >"$T/ngx/nginx.conf"
check "the recipe's upstream and listen lines were found" \
  'grep -q "127.0.0.1:${SP[2]} " "$T/ngx/nginx.conf" && grep -q "listen 127.0.0.1:$NP;" "$T/ngx/nginx.conf"'
"$NGINX" -t -p "$T/ngx" -c "$T/ngx/nginx.conf" >"$T/ngx-t.log" 2>&1 || { cat "$T/ngx-t.log"; bad "nginx accepts the recipe"; exit 1; }
"$NGINX" -p "$T/ngx" -c "$T/ngx/nginx.conf" -g "daemon off;" >"$T/ngx.log" 2>&1 &
NGX_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$NP/health" && break; sleep 0.1; done
G=http://127.0.0.1:$NP
check "nginx answers for the instances" '[ "$(curl -s "$G/health" | jget status)" = ok ]'

# conversation c: its system prompt and first question; turn t of it
N_CONV=8
conv_msgs() { # c turn -> the messages array of that turn (earlier replies from $T/c$c.a*)
  local c=$1 t=$2 m
  m="{\"role\":\"system\",\"content\":\"You are assistant number $c. Answer briefly.\"},{\"role\":\"user\",\"content\":\"Question $c: tell me about topic $((c * 7)).\"}"
  for ((k = 1; k < t; k++)); do
    m="$m,$(node -e 'console.log(JSON.stringify({role:"assistant",content:process.argv[1]}))' "$(cat "$T/c$c.a$k")")"
    m="$m,{\"role\":\"user\",\"content\":\"And then, step $k?\"}"
  done
  echo "[$m]"
}
turn() { # c t -> writes $T/c$c.a$t, echoes "status cached"
  local c=$1 t=$2 hdr=() body st
  [ "$c" = 0 ] && hdr=(-H "X-Conversation-Id: conv-zero")
  body=$(curl -s -w '\n%{http_code}' "${hdr[@]}" -H 'Content-Type: application/json' "$G/v1/chat/completions" \
    -d "{\"messages\":$(conv_msgs "$c" "$t"),\"temperature\":0,\"max_tokens\":8}")
  st=${body##*$'\n'}
  body=${body%$'\n'*}
  echo "$body" | jget choices.0.message.content >"$T/c$c.a$t"
  echo "$st $(echo "$body" | jget usage.prompt_tokens_details.cached_tokens)"
}
served() { curl -s "http://127.0.0.1:${SP[$1]}/metrics" | sed -n 's/^rkmojo_generated_tokens_total //p'; }

for c in $(seq 0 $((N_CONV - 1))); do turn "$c" 1 >/dev/null; done
hits=0 codes=0
for c in $(seq 0 $((N_CONV - 1))); do
  read -r st cached < <(turn "$c" 2)
  [ "$st" = 200 ] && codes=$((codes + 1))
  [ "${cached:-0}" -gt 0 ] 2>/dev/null && hits=$((hits + 1))
done
check "second turns answered ($codes of $N_CONV)" '[ "$codes" = $N_CONV ]'
check "every second turn found its first turn's KV on its instance ($hits of $N_CONV)" '[ "$hits" = $N_CONV ]'
used=0 busiest=0 most=-1
for i in 0 1 2; do
  g=$(served "$i")
  [ "${g:-0}" -gt 0 ] && used=$((used + 1))
  [ "${g:-0}" -gt "$most" ] && most=${g:-0} && busiest=$i
done
check "the conversations spread over the instances ($used of 3 used)" '[ "$used" -ge 2 ]'

# the busiest instance dies; the next two turns of every conversation
kill -9 "${SPID[$busiest]}"
wait "${SPID[$busiest]}" 2>/dev/null
lost=0 hits3=0 hits4=0
for t in 3 4; do
  for c in $(seq 0 $((N_CONV - 1))); do
    read -r st cached < <(turn "$c" $t)
    [ "$st" = 200 ] || lost=$((lost + 1))
    [ "${cached:-0}" -gt 0 ] 2>/dev/null && { [ $t = 3 ] && hits3=$((hits3 + 1)) || hits4=$((hits4 + 1)); }
  done
done
check "no request lost after an instance died ($lost failed)" '[ "$lost" = 0 ]'
check "the conversations of the live instances kept their cache ($hits3 of $N_CONV hit at turn 3)" \
  '[ "$hits3" -gt 0 ] && [ "$hits3" -lt $N_CONV ]'
check "the moved ones hit again on their new instance (all $hits4 of $N_CONV at turn 4)" '[ "$hits4" = $N_CONV ]'

[ "$fails" = 0 ] || { echo "--- nginx logs"; tail -20 "$T/ngx/logs/error.log"; cat "$T/ngx/logs/access.log"; }
echo "$fails failed"
[ "$fails" = 0 ]
