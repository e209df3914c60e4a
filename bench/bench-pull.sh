#!/usr/bin/env bash
# bench-pull.sh - `rkmojo pull` from a local nginx against a plain `curl -o`
# of the same file: throughput, peak RSS, peak disk use of the output
# directory (sampled with du every 0.2 s: the output plus the staging file's
# blocks) against the finished model's size.
#
#   bench/bench-pull.sh [PRESET] [DTYPE] [WORKDIR]
#   e.g. bench/bench-pull.sh qwen3-30b-a3b q4_k_m /var/tmp/rkm
#   VERIFY=1 bench/bench-pull.sh ...   nginx names the file's SHA-256 as
#                                      Hugging Face does (X-Linked-Etag):
#                                      the pull hashes it too
#   PULL_ARGS="--window 1G" ...        options for rkmojo pull
#   HF=1 bench/bench-pull.sh ...       a safetensors checkpoint instead
#                                      (synth --hf-out, DTYPE f16 or bf16),
#                                      served as a Hugging Face repository
#                                      and pulled as hf://org/ckpt; curl
#                                      fetches its files one after another
#   SETS="--set n_layer=4" ...         synth's --set options
#
# Synthesizes PRESET in DTYPE if WORKDIR/PRESET-DTYPE.gguf is not there,
# serves WORKDIR with nginx on a free loopback port, drops the page cache
# (as root) before each run, runs curl -o WORKDIR/curl.out (then removes
# it), then rkmojo pull into WORKDIR/pull.rkmojo (removed at the end).
# Needs the disk for the GGUF plus one copy of it.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-olmoe-1b-7b}; dtype=${2:-q4_k_m}; work=${3:-/tmp/rkmojo-bench}
bin=$PWD/${RKMOJO:-build/rkmojo}
mkdir -p "$work"
name=$preset-$dtype.gguf
in=$work/$name
hf=${HF:-0}
# shellcheck disable=SC2086  # SETS: a list of options
if [ "$hf" = 1 ]; then
  name=$preset-$dtype-hf
  [ -f "$work/$name/config.json" ] ||
    "$bin" synth --preset "$preset" --dtype "$dtype" ${SETS:-} -o "$work/$name.gguf" --hf-out "$work/$name" --quiet
  rm -f "$work/$name.gguf"
  size=$(du -s -b "$work/$name" | cut -f1)
  files=$(cd "$work/$name" && ls)
else
  [ -f "$in" ] || "$bin" synth --preset "$preset" --dtype "$dtype" ${SETS:-} -o "$in" --quiet
  size=$(stat -c %s "$in")
fi
sha_header=""
[ "${VERIFY:-0}" = 1 ] && [ "$hf" = 0 ] && sha_header="add_header X-Linked-Etag \"\\\"$(sha256sum "$in" | cut -d' ' -f1)\\\"\" always;"
ngx=$(mktemp -d)
chmod 755 "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
cat >"$ngx/nginx.conf" <<EOF
user $(id -un) $(id -gn);
worker_processes 1; pid $ngx/nginx.pid; error_log $ngx/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $ngx/b; proxy_temp_path $ngx/p; fastcgi_temp_path $ngx/f;
  uwsgi_temp_path $ngx/u; scgi_temp_path $ngx/s; sendfile on;
  server { listen 127.0.0.1:$port; root $work; $sha_header
    location /hf/org/ckpt/resolve/main/ { alias $work/$name/; } } }
EOF
nginx -p "$ngx" -c "$ngx/nginx.conf" -g "daemon off;" &
NGX=$!
trap 'kill $NGX 2>/dev/null; rm -rf "$ngx" "$work/curl.out" "$work/pull.rkmojo"' EXIT
sleep 0.5
url=http://127.0.0.1:$port/$name
src=$url
[ "$hf" = 1 ] && src=hf://org/ckpt
drop() { sync; if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; else echo "(cannot drop the page cache: not root)"; fi; }
secs_of() { grep "Elapsed (wall clock)" "$1" | awk '{print $NF}' | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }'; }

drop
if [ "$hf" = 1 ]; then
  curl_args=()
  for f in $files; do curl_args+=(-o "$work/curl.out" "http://127.0.0.1:$port/hf/org/ckpt/resolve/main/$f"); done
  /usr/bin/time -v bash -c 'for ((i = 1; i < $#; i += 3)); do curl -s "${@:i:3}" || exit 1; rm -f "${@:i+1:1}"; done' _ "${curl_args[@]}" 2>"$work/curl-time.txt"
else
  /usr/bin/time -v curl -s -o "$work/curl.out" "$url" 2>"$work/curl-time.txt"
fi
curl_s=$(secs_of "$work/curl-time.txt")
rm -f "$work/curl.out"

drop
rm -rf "$work/pull.rkmojo"
peak=0
( while sleep 0.2; do du -s -B1 "$work/pull.rkmojo" 2>/dev/null | cut -f1; done ) >"$work/pull-du.txt" &
DU=$!
# shellcheck disable=SC2086  # PULL_ARGS: a list of options
HF_ENDPOINT=http://127.0.0.1:$port/hf /usr/bin/time -v "$bin" pull ${PULL_ARGS:-} "$src" "$work/pull.rkmojo" 2>"$work/pull-time.txt"
kill $DU 2>/dev/null || true
pull_s=$(secs_of "$work/pull-time.txt")
rss=$(grep "Maximum resident set size" "$work/pull-time.txt" | awk '{print $NF}')
peak=$(sort -n "$work/pull-du.txt" | tail -1)
final=$(du -s -B1 "$work/pull.rkmojo" | cut -f1)
peak=${peak:-0}
[ "$peak" -ge "$final" ] || peak=$final # a pull shorter than one sample
printf 'source %s: %.2f GB\n' "$name" "$(echo "$size / 1000000000" | bc -l)"
printf 'curl -o:     %6.1f s, %4.0f MB/s\n' "$curl_s" "$(echo "$size / $curl_s / 1000000" | bc -l)"
printf 'rkmojo pull: %6.1f s, %4.0f MB/s (%.0f%% of curl), peak RSS %.0f MiB\n' "$pull_s" \
  "$(echo "$size / $pull_s / 1000000" | bc -l)" "$(echo "100 * $curl_s / $pull_s" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
grep -h "SHA-256" "$work/pull-time.txt" || true
printf 'disk: peak %.2f GB for a %.2f GB model (%.0f MB over it)\n' "$(echo "$peak / 1000000000" | bc -l)" \
  "$(echo "$final / 1000000000" | bc -l)" "$(echo "($peak - $final) / 1000000" | bc -l)"
