#!/usr/bin/env bash
# test-pull.sh - `rkmojo pull` against nginx on a loopback port (Range
# requests as any static server answers them), serving synthetic GGUFs:
#   - the pulled model is byte for byte `rkmojo convert` of the same file,
#     with --quant keep (the default), q8_0, and --expert-layout plain
#   - the staging file holds at most the window plus the pieces the
#     converter is using (--window 4M on a 30 MB file), and is gone after
#   - a SHA-256 named as Hugging Face names it (X-Linked-Etag) is checked:
#     a match passes, a mismatch fails with no model and no progress kept,
#     a killed pull resumes its hash from the saved state (a damaged state
#     is caught as a mismatch)
#   - a redirect is followed; hf://ORG/REPO:FILE goes to $HF_ENDPOINT with
#     $HF_TOKEN as a bearer token (nginx refuses other requests)
#   - no OUT: the model lands in the models directory as NAME.rkmojo
#   - SIGKILL once expert layers have landed: the rerun keeps them (and
#     receives less than the file), a layer damaged meanwhile is converted
#     again; not in the quick tier: three kills at random points then a
#     run give the same bytes, a file changed on the server (another
#     ETag) starts over
#   - a server that drops connections, sends short bodies, answers 429/503
#     with Retry-After or stalls: retried, convert's bytes; one that
#     answers 416, changes the ETag mid-pull or is always busy: an error
#   - 404, a refused token, a server that ignores Range, a file that is not
#     a GGUF: a clear error and no model left behind
#   - a safetensors checkpoint (hf://ORG/REPO, two shards): convert's
#     bytes (but for the manifest's source), each shard's SHA-256 checked
#     (a mismatch names the shard), bounded staging, killed and resumed;
#     a repository without config.json or that does not exist: an error
#   - rkmojo serve's /api/pull: refused without an API key or --pull on;
#     with one, NDJSON progress to success, the model in /api/tags and
#     generating, a second pull a no-op, a checkpoint, 404 / a server path
#     / a bad name refused; the official ollama client pulls through it
# Exit 0 pass, 1 fail, 77 skip. No timed assertions.
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-build}
BIN=$PWD/$BUILD/rkmojo
skip() { echo "skip: $1"; exit 77; }
[ -x "$BIN" ] || skip "no $BIN"
[ -z "${RKM_RUNNER:-}" ] || skip "pull tests run natively only"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || skip "nginx missing (scripts/setup.sh installs it)"
command -v node >/dev/null || skip "node missing"
command -v curl >/dev/null || skip "curl missing"

T=$(mktemp -d)
chmod 755 "$T" # nginx's worker may run as another user
NGX_PID=""
SPIDS=()
cleanup() {
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null
  for p in ${SPIDS[@]+"${SPIDS[@]}"}; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
. tests/common/check.sh
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

mkdir -p "$T/www" "$T/ngx"
"$BIN" synth --preset tiny --set n_embd=256 --set n_ff_exp=256 --set n_expert=64 --set n_layer=4 --dtype q4_k_m \
  -o "$T/www/m.gguf" --quiet >"$T/synth.log" 2>&1 || { cat "$T/synth.log"; exit 1; }
echo "not a GGUF file, but long enough to be asked for a first byte and more" >"$T/www/notes.txt"
cp "$T/www/m.gguf" "$T/www/s.gguf"
# a safetensors checkpoint (config.json, tokenizer files, an index and two shards)
"$BIN" synth --preset tiny --set n_embd=256 --set n_ff_exp=256 --set n_expert=16 --set n_layer=4 --dtype f16 \
  -o "$T/ck.gguf" --hf-out "$T/www/ckpt" --quiet >"$T/synth2.log" 2>&1 || { cat "$T/synth2.log"; exit 1; }
chmod 755 "$T/www/ckpt"
chmod 644 "$T/www/"* "$T/www/ckpt/"* 2>/dev/null
CK1=model-00001-of-00002.safetensors CK2=model-00002-of-00002.safetensors
CKSHA1=$(sha256sum "$T/www/ckpt/$CK1" | cut -d' ' -f1)
CKSHA2=$(sha256sum "$T/www/ckpt/$CK2" | cut -d' ' -f1)
CKBAD2=$(echo "$CKSHA2" | tr 0-9a-f 1-9a-f0)
SHA=$(sha256sum "$T/www/s.gguf" | cut -d' ' -f1)
BADSHA=$(echo "$SHA" | tr 0-9a-f 1-9a-f0)

NP=$(free_port)
# the worker runs as this user (root's would be nobody, who may not reach $T)
cat >"$T/ngx/nginx.conf" <<EOF
user $(id -un) $(id -gn);
worker_processes 1; pid $T/ngx/nginx.pid; error_log $T/ngx/error.log;
events { worker_connections 64; }
http {
  map \$uri \$ck_sha {
    ~/$CK1\$ "\"$CKSHA1\"";
    ~/$CK2\$ "\"$CKSHA2\"";
    default "";
  }
  map \$uri \$ck_bad {
    ~/$CK1\$ "\"$CKSHA1\"";
    ~/$CK2\$ "\"$CKBAD2\"";
    default "";
  }
  access_log $T/ngx/access.log; client_body_temp_path $T/ngx/body; proxy_temp_path $T/ngx/proxy;
  fastcgi_temp_path $T/ngx/fcgi; uwsgi_temp_path $T/ngx/uwsgi; scgi_temp_path $T/ngx/scgi;
  server {
    listen 127.0.0.1:$NP;
    root $T/www;
    location /moved/ { rewrite ^/moved/(.*)\$ /$NP-again/\$1 redirect; }
    location /$NP-again/ { rewrite ^/$NP-again/(.*)\$ /\$1 redirect; }
    location /whole/ { alias $T/www/; max_ranges 0; }
    location /slow/ { alias $T/www/; limit_rate 3m; }
    location /sha/ { alias $T/www/; add_header X-Linked-Etag "\"$SHA\"" always; }
    location /slowsha/ { alias $T/www/; limit_rate 3m; add_header X-Linked-Etag "\"$SHA\"" always; }
    location /badsha/ { alias $T/www/; add_header X-Linked-Etag "\"$BADSHA\"" always; }
    location /hf/org/repo/resolve/main/ {
      if (\$http_authorization != "Bearer s3cret") { return 401; }
      alias $T/www/;
    }
    location /hf/org/ckpt/resolve/main/ { alias $T/www/ckpt/; add_header X-Linked-Etag \$ck_sha always; }
    location /hf/org/slowck/resolve/main/ { alias $T/www/ckpt/; limit_rate 2m; add_header X-Linked-Etag \$ck_sha always; }
    location /hf/org/badck/resolve/main/ { alias $T/www/ckpt/; add_header X-Linked-Etag \$ck_bad always; }
    location /hf/org/plainck/resolve/main/ { alias $T/www/ckpt/; }
  }
}
EOF
"$NGINX" -t -p "$T/ngx" -c "$T/ngx/nginx.conf" >"$T/ngx-t.log" 2>&1 || { cat "$T/ngx-t.log"; exit 1; }
"$NGINX" -p "$T/ngx" -c "$T/ngx/nginx.conf" -g "daemon off;" >"$T/ngx.log" 2>&1 &
NGX_PID=$!
U=http://127.0.0.1:$NP
for _ in $(seq 100); do node -e "require('http').get('$U/m.gguf',r=>process.exit(r.statusCode==200?0:1)).on('error',()=>process.exit(1))" && break; sleep 0.1; done

same() { # a b: the same files, the same bytes
  diff -r "$1" "$2" >"$T/diff.log" 2>&1
}
no_model() { [ ! -e "$1/manifest.json" ] && [ ! -e "$1/.pull" ]; }
layers_done() { grep -o '"blob_stride"' "$1/.convert-progress.json" 2>/dev/null | wc -l; }
pull_killed() { # URL OUT: a pull killed with SIGKILL once an expert layer has landed
  "$BIN" pull "$1" "$2" --quiet >/dev/null 2>&1 &
  local kp=$!
  for _ in $(seq 300); do [ "$(layers_done "$2")" -ge 1 ] && break; sleep 0.05; done
  kill -9 $kp 2>/dev/null
  wait $kp 2>/dev/null
}

# byte for byte the converter's output
"$BIN" convert "$T/www/m.gguf" "$T/keep.ref" --quant keep --quiet >/dev/null 2>&1
"$BIN" pull "$U/m.gguf" "$T/keep.rkmojo" --window 4M >"$T/p1.log" 2>&1
check "pull of a URL: exit 0" '[ $? = 0 ] || { cat "$T/p1.log"; false; }'
check "pull (--quant keep) is byte for byte convert --quant keep" 'same "$T/keep.rkmojo" "$T/keep.ref" || { cat "$T/diff.log"; false; }'
check "the staging directory is gone" '[ -e "$T/keep.rkmojo/manifest.json" ] && [ ! -e "$T/keep.rkmojo/.pull" ]'
staged=$(tr '\r' '\n' <"$T/p1.log" | sed -n 's/.*at most \([0-9.]*\) MiB staged.*/\1/p')
# a layer's expert parts here fit one 4 MiB piece per part (gate, up,
# down): the converter holds those three while the fetchers stay within the window
check "at most the 4 MiB window plus the 3 pieces of a layer's experts staged (got ${staged:-?} MiB of a 30 MB file)" \
  '[ -n "$staged" ] && node -e "process.exit(+process.argv[1] <= 4 + 3 * 4 + 1 ? 0 : 1)" "$staged"'
check "the staging file's pages were freed as it went" 'grep -q "MiB staged" "$T/p1.log" && ! grep -q "no holes" "$T/p1.log"'
check "the pulled model generates" \
  '"$BIN" run -m "$T/keep.rkmojo" --prompt-ids 1,2,3 -n 4 --temp 0 >"$T/run.log" 2>&1 || { cat "$T/run.log"; false; }'

"$BIN" convert "$T/www/m.gguf" "$T/q8.ref" --quant q8_0 --expert-layout plain --quiet >/dev/null 2>&1
"$BIN" pull "$U/moved/m.gguf" "$T/q8.rkmojo" --quant q8_0 --expert-layout plain --connections 2 --quiet >"$T/p2.log" 2>&1
check "through two redirects, --quant q8_0 --expert-layout plain: byte for byte convert's" \
  '[ $? = 0 ] && same "$T/q8.rkmojo" "$T/q8.ref" || { cat "$T/p2.log" "$T/diff.log"; false; }'

# the file's SHA-256, as Hugging Face names it (X-Linked-Etag)
"$BIN" convert "$T/www/s.gguf" "$T/s.ref" --quant keep --quiet >/dev/null 2>&1
"$BIN" pull "$U/sha/s.gguf" "$T/sha.rkmojo" --window 4M >"$T/sha.log" 2>&1 # the hash holds fetching back
check "a SHA-256 named by the server: checked, convert's bytes" \
  '[ $? = 0 ] && grep -q "SHA-256 of the file checked" "$T/sha.log" && same "$T/sha.rkmojo" "$T/s.ref" || { cat "$T/sha.log" "$T/diff.log"; false; }'
"$BIN" pull "$U/badsha/s.gguf" "$T/badsha.rkmojo" >"$T/badsha.log" 2>&1
check "a SHA-256 that does not match: an error naming both, no model, no progress kept" \
  '[ $? != 0 ] && grep -q "SHA-256 is $SHA, the server names $BADSHA" "$T/badsha.log" && no_model "$T/badsha.rkmojo" &&
   [ ! -e "$T/badsha.rkmojo/.convert-progress.json" ] || { cat "$T/badsha.log"; ls -a "$T/badsha.rkmojo"; false; }'
pull_killed "$U/slowsha/s.gguf" "$T/rsha.rkmojo"
"$BIN" pull "$U/slowsha/s.gguf" "$T/rsha.rkmojo" >"$T/rsha.log" 2>&1
check "killed and resumed: the hash goes on from its saved state, checked, convert's bytes" \
  '[ $? = 0 ] && grep -q "^resumed: kept" "$T/rsha.log" && grep -q "SHA-256 of the file checked" "$T/rsha.log" &&
   same "$T/rsha.rkmojo" "$T/s.ref" || { cat "$T/rsha.log" "$T/diff.log"; false; }'
# the same, the saved state damaged: a wrong hash is caught, nothing kept
rm -rf "$T/rsha.rkmojo"
pull_killed "$U/slowsha/s.gguf" "$T/rsha.rkmojo"
node -e 'const fs=require("fs"),f=process.argv[1],j=JSON.parse(fs.readFileSync(f));
  j.resume_note=j.resume_note.replace(/^(sha256 \d+ )(.)/,(m,a,c)=>a+(c==="0"?"1":"0"));fs.writeFileSync(f,JSON.stringify(j))' \
  "$T/rsha.rkmojo/.convert-progress.json"
"$BIN" pull "$U/slowsha/s.gguf" "$T/rsha.rkmojo" >"$T/rsha2.log" 2>&1
check "a damaged saved hash state: the mismatch is caught, no model, no progress kept" \
  '[ $? != 0 ] && grep -q "SHA-256 is" "$T/rsha2.log" && no_model "$T/rsha.rkmojo" && [ ! -e "$T/rsha.rkmojo/.convert-progress.json" ] ||
   { cat "$T/rsha2.log"; false; }'

# Hugging Face names, endpoint and token
HF_ENDPOINT=$U/hf HF_TOKEN=s3cret "$BIN" pull hf://org/repo:m.gguf "$T/hf.rkmojo" --quiet >"$T/p3.log" 2>&1
check "hf://org/repo:m.gguf through HF_ENDPOINT with HF_TOKEN: convert's bytes" \
  '[ $? = 0 ] && same "$T/hf.rkmojo" "$T/keep.ref" || { cat "$T/p3.log" "$T/diff.log"; false; }'
HF_ENDPOINT=$U/hf HF_TOKEN= "$BIN" pull hf://org/repo:m.gguf "$T/hf2.rkmojo" --quiet >"$T/p4.log" 2>&1
check "without the token: an error that names HF_TOKEN, no model" \
  '[ $? != 0 ] && grep -q "401.*HF_TOKEN" "$T/p4.log" && no_model "$T/hf2.rkmojo" || { cat "$T/p4.log"; false; }'
HF_ENDPOINT=$U/hf HF_TOKEN=wrong "$BIN" pull hf://org/repo:m.gguf "$T/hf3.rkmojo" --quiet >"$T/p5.log" 2>&1
check "a wrong token: refused, no model" '[ $? != 0 ] && grep -q "token was refused" "$T/p5.log" && no_model "$T/hf3.rkmojo" || { cat "$T/p5.log"; false; }'
HF_ENDPOINT=$U/hf HF_TOKEN=s3cret "$BIN" pull hf://org/repo "$T/hf4.rkmojo" >"$T/p6.log" 2>&1
check "hf:// of a repository without config.json: said so, with how to name a GGUF of it, no model" \
  '[ $? != 0 ] && grep -q "no config.json.*hf://org/repo:FILE.gguf" "$T/p6.log" && no_model "$T/hf4.rkmojo" || { cat "$T/p6.log"; false; }'

# a safetensors checkpoint: hf://ORG/REPO without a file
same_ck() { # a b: the same files, the same bytes, the manifests alike but for the source they name
  diff -r --exclude=manifest.json "$1" "$2" >"$T/diff.log" 2>&1 &&
    node -e 'const fs=require("fs"),r=f=>{const j=JSON.parse(fs.readFileSync(f+"/manifest.json"));delete j.source;return JSON.stringify(j)};
      process.exit(r(process.argv[1])===r(process.argv[2])?0:1)' "$1" "$2" >>"$T/diff.log" 2>&1
}
"$BIN" convert "$T/www/ckpt" "$T/ck.ref" --quant keep --quiet >/dev/null 2>&1
"$BIN" convert "$T/www/ckpt" "$T/ck4.ref" --quant q4_0 --expert-layout plain --quiet >/dev/null 2>&1
HF_ENDPOINT=$U/hf "$BIN" pull hf://org/ckpt "$T/ck.rkmojo" --window 4M >"$T/ck.log" 2>&1
check "hf://org/ckpt (two shards, each SHA-256 named): checked, convert's bytes" \
  '[ $? = 0 ] && grep -q "SHA-256 of the file checked" "$T/ck.log" && same_ck "$T/ck.rkmojo" "$T/ck.ref" && [ ! -e "$T/ck.rkmojo/.pull" ] &&
   grep -q "\"source\":[[:space:]]*\"hf:org/ckpt@main\"" "$T/ck.rkmojo/manifest.json" || { cat "$T/ck.log" "$T/diff.log"; false; }'
staged=$(tr '\r' '\n' <"$T/ck.log" | sed -n 's/.*at most \([0-9.]*\) MiB staged.*/\1/p')
check "a checkpoint's staging holds at most the window plus a layer's pieces (${staged:-?} MiB of 33 MB)" \
  '[ -n "$staged" ] && node -e "process.exit(+process.argv[1] <= 4 + 3 * 4 + 1 ? 0 : 1)" "$staged"'
check "the pulled checkpoint generates as the converted one" \
  '"$BIN" run -m "$T/ck.rkmojo" -p "Hello" -n 6 --temp 0 --print-ids >"$T/ck.run" 2>/dev/null && "$BIN" run -m "$T/ck.ref" -p "Hello" -n 6 --temp 0 --print-ids >"$T/ck.run2" 2>/dev/null &&
   diff "$T/ck.run" "$T/ck.run2" >/dev/null || { cat "$T/ck.run" "$T/ck.run2"; false; }'
HF_ENDPOINT=$U/hf "$BIN" pull hf://org/plainck@main "$T/ck4.rkmojo" --quant q4_0 --expert-layout plain --connections 2 --quiet >"$T/ck4.log" 2>&1
check "@main, --quant q4_0 --expert-layout plain, no SHA-256 named: convert's bytes" \
  '[ $? = 0 ] && same_ck "$T/ck4.rkmojo" "$T/ck4.ref" || { cat "$T/ck4.log" "$T/diff.log"; false; }'
HF_ENDPOINT=$U/hf "$BIN" pull hf://org/badck "$T/badck.rkmojo" >"$T/badck.log" 2>&1
check "a shard whose SHA-256 does not match: an error naming the shard, no model, no progress kept" \
  '[ $? != 0 ] && grep -q "$CK2: the downloaded file.s SHA-256 is $CKSHA2, the server names $CKBAD2" "$T/badck.log" && no_model "$T/badck.rkmojo" &&
   [ ! -e "$T/badck.rkmojo/.convert-progress.json" ] || { cat "$T/badck.log"; ls -a "$T/badck.rkmojo"; false; }'
HF_ENDPOINT=$U/hf "$BIN" pull hf://org/slowck "$T/kck.rkmojo" --quiet >/dev/null 2>&1 &
kp=$!
for _ in $(seq 300); do [ "$(layers_done "$T/kck.rkmojo")" -ge 1 ] && break; sleep 0.05; done
kill -9 $kp 2>/dev/null; wait $kp 2>/dev/null
kept_before=$(layers_done "$T/kck.rkmojo")
HF_ENDPOINT=$U/hf "$BIN" pull hf://org/slowck "$T/kck.rkmojo" >"$T/kck.log" 2>&1
check "a checkpoint's pull killed after $kept_before expert layers landed, rerun: kept them, checked, convert's bytes" \
  '[ $? = 0 ] && [ "$kept_before" -ge 1 ] && grep -q "^resumed: kept" "$T/kck.log" && grep -q "SHA-256 of the file checked" "$T/kck.log" &&
   same_ck "$T/kck.rkmojo" "$T/ck.ref" || { cat "$T/kck.log" "$T/diff.log"; false; }'
HF_ENDPOINT=$U/hf "$BIN" pull hf://org/nothere "$T/nothere.rkmojo" --quiet >"$T/nothere.log" 2>&1
check "hf:// of a repository that does not exist: an error, no model" \
  '[ $? != 0 ] && no_model "$T/nothere.rkmojo" || { cat "$T/nothere.log"; false; }'

# into the models directory
RKMOJO_MODELS=$T/models "$BIN" pull "$U/m.gguf" --quiet >"$T/p7.log" 2>&1
check "no OUT: the models directory's m.rkmojo, listed" \
  '[ $? = 0 ] && same "$T/models/m.rkmojo" "$T/keep.ref" && RKMOJO_MODELS=$T/models "$BIN" list 2>&1 | grep -q "^m\b" || { cat "$T/p7.log"; RKMOJO_MODELS=$T/models "$BIN" list; false; }'

# interrupted and resumed
pull_killed "$U/slow/m.gguf" "$T/k.rkmojo"
check "killed after a layer landed: no manifest, its progress kept" \
  '[ ! -e "$T/k.rkmojo/manifest.json" ] && [ "$(layers_done "$T/k.rkmojo")" -ge 1 ]'
"$BIN" pull "$U/slow/m.gguf" "$T/k.rkmojo" >"$T/k1.log" 2>&1
kept=$(sed -n 's/^resumed: kept resident.bin and \([0-9]*\) expert layers.*/\1/p' "$T/k1.log")
recv=$(tr '\r' '\n' <"$T/k1.log" | sed -n 's/.*: \([0-9.]*\) MiB received of \([0-9.]*\) MiB.*/\1 \2/p')
check "the rerun keeps what landed (${kept:-?} expert layers) and receives less than the file (${recv:-?} MiB)" \
  '[ "${kept:-0}" -ge 1 ] && node -e "process.exit(+process.argv[1] < +process.argv[2] ? 0 : 1)" $recv || { cat "$T/k1.log"; false; }'
check "and ends byte for byte as convert writes it" 'same "$T/k.rkmojo" "$T/keep.ref" || { cat "$T/diff.log"; false; }'

# a layer that landed, damaged before the rerun: converted again
rm -rf "$T/d.rkmojo"
pull_killed "$U/slow/m.gguf" "$T/d.rkmojo"
printf '\x5a' | dd of="$T/d.rkmojo/experts/blk.0.bin" bs=1 seek=100 conv=notrunc status=none
# what a kill between an atomic write's temporary and its rename leaves
echo '{' >"$T/d.rkmojo/.convert-progress.json.tmp99999.3"
echo '{' >"$T/d.rkmojo/tokenizer.json.tmp99999.4"
"$BIN" pull "$U/slow/m.gguf" "$T/d.rkmojo" >"$T/d1.log" 2>&1
check "a damaged expert file is converted again, a killed write's temporaries removed: convert's bytes" \
  '[ $? = 0 ] && grep -q "^resumed: kept resident.bin" "$T/d1.log" && same "$T/d.rkmojo" "$T/keep.ref" || { cat "$T/d1.log" "$T/diff.log"; false; }'

# three kills at random points, then a run to the end; a changed file
# (the ci and full tiers: about 15 s more)
if [ "${RKM_TEST_TIER:-ci}" != quick ]; then
rm -rf "$T/r.rkmojo"
for i in 1 2 3; do
  "$BIN" pull "$U/slow/m.gguf" "$T/r.rkmojo" --quiet >/dev/null 2>&1 &
  KP=$!
  sleep "$(node -e 'console.log((0.1 + Math.random() * 1.5).toFixed(2))')"
  kill -9 $KP 2>/dev/null
  wait $KP 2>/dev/null
done
"$BIN" pull "$U/slow/m.gguf" "$T/r.rkmojo" --quiet >"$T/r.log" 2>&1
check "killed three times at random points, then run: convert's bytes" \
  '[ $? = 0 ] && same "$T/r.rkmojo" "$T/keep.ref" || { cat "$T/r.log" "$T/diff.log"; false; }'

# the file changes on the server between two runs
rm -rf "$T/c.rkmojo"
pull_killed "$U/slow/m.gguf" "$T/c.rkmojo"
"$BIN" synth --preset tiny --set n_embd=256 --set n_ff_exp=256 --set n_expert=64 --set n_layer=4 --dtype q4_k_m \
  --seed 2 -o "$T/www/m2.gguf" --quiet && chmod 644 "$T/www/m2.gguf" && mv "$T/www/m2.gguf" "$T/www/m.gguf"
"$BIN" convert "$T/www/m.gguf" "$T/new.ref" --quant keep --quiet >/dev/null 2>&1
"$BIN" pull "$U/slow/m.gguf" "$T/c.rkmojo" >"$T/c.log" 2>&1
check "a file changed on the server: started again, the new file's bytes" \
  '[ $? = 0 ] && grep -q "started again" "$T/c.log" && same "$T/c.rkmojo" "$T/new.ref" || { cat "$T/c.log" "$T/diff.log"; false; }'
fi

# a misbehaving server and network (tests/js/fault-server.mjs)
node tests/js/fault-server.mjs "$T/www" "$T/fs.port" >"$T/fs.log" 2>&1 &
FS_PID=$!
for _ in $(seq 100); do [ -s "$T/fs.port" ] && break; sleep 0.1; done
F=http://127.0.0.1:$(cat "$T/fs.port")
cur_ref=$T/keep.ref
[ -e "$T/new.ref" ] && cur_ref=$T/new.ref # the ci tier replaced the file
for mode in ok drop short busy; do
  "$BIN" pull "$F/$mode/m.gguf" "$T/f-$mode.rkmojo" --quiet >"$T/f-$mode.log" 2>&1
  check "$mode: byte for byte as convert writes it ($(curl -s "$F/count/$mode") requests)" \
    '[ $? = 0 ] && same "$T/f-$mode.rkmojo" "$cur_ref" || { cat "$T/f-$mode.log" "$T/diff.log"; false; }'
done
# a signed storage URL that expires: ranges go to it directly, and it is
# resolved again once it answers 403
"$BIN" pull "$F/hfres/m.gguf" "$T/f-hf.rkmojo" --quiet >"$T/f-hf.log" 2>&1
rc=$?
nres=$(curl -s "$F/count/hfres"); nstore=$(curl -s "$F/count/store")
check "an expiring storage URL: used directly ($nres resolutions for $nstore ranges), resolved again, convert's bytes" \
  '[ $rc = 0 ] && [ "$nres" -gt 1 ] && [ "$nres" -lt "$nstore" ] && same "$T/f-hf.rkmojo" "$cur_ref" || { cat "$T/f-hf.log" "$T/diff.log"; false; }'
RKM_PULL_STALL_S=1 "$BIN" pull "$F/stall/m.gguf" "$T/f-stall.rkmojo" --quiet >"$T/f-stall.log" 2>&1
check "a range that stalls is asked again: convert's bytes" \
  '[ $? = 0 ] && same "$T/f-stall.rkmojo" "$cur_ref" || { cat "$T/f-stall.log" "$T/diff.log"; false; }'
"$BIN" pull "$F/gone/m.gguf" "$T/f-gone.rkmojo" >"$T/f-gone.log" 2>&1
check "416 after the first answer: the file shrank, said so, no model" \
  '[ $? != 0 ] && grep -q "416.*smaller" "$T/f-gone.log" && no_model "$T/f-gone.rkmojo" || { cat "$T/f-gone.log"; false; }'
"$BIN" pull "$F/changing/m.gguf" "$T/f-chg.rkmojo" >"$T/f-chg.log" 2>&1
check "the ETag changes during the pull: said so, no model" \
  '[ $? != 0 ] && grep -q "changed on the server" "$T/f-chg.log" && no_model "$T/f-chg.rkmojo" || { cat "$T/f-chg.log"; false; }'
"$BIN" pull "$F/nope/m.gguf" "$T/f-nope.rkmojo" >"$T/f-nope.log" 2>&1
check "503 every time: gives up after its tries, no model" \
  '[ $? != 0 ] && grep -q "503.*gave up after 6 tries" "$T/f-nope.log" && no_model "$T/f-nope.rkmojo" || { cat "$T/f-nope.log"; false; }'
kill $FS_PID 2>/dev/null

# the server's /api/pull (Ollama's): into --models-dir, progress as NDJSON
serve() { # name args...: starts rkmojo serve, sets SV (its base URL)
  local n=$1; shift
  rm -f "$T/$n.port"
  "$BIN" serve --port 0 --port-file "$T/$n.port" "$@" >"$T/$n.log" 2>&1 &
  SPIDS+=($!)
  for _ in $(seq 300); do [ -s "$T/$n.port" ] && break; sleep 0.05; done
  SV=http://127.0.0.1:$(cat "$T/$n.port")
}
SPIDS=()
mkdir -p "$T/srv"
serve s0 --models-dir "$T/srv"
code=$(curl -s -o "$T/s0.out" -w '%{http_code}' "$SV/api/pull" -d "{\"model\":\"$U/m.gguf\"}")
check "no API key and no --pull on: /api/pull refused (403)" '[ "$code" = 403 ] && grep -q "pull on" "$T/s0.out" || { echo "$code"; cat "$T/s0.out"; false; }'
HF_ENDPOINT=$U/hf serve s1 --models-dir "$T/srv" --api-key k3y
A=(-H "Authorization: Bearer k3y")
curl -sN "${A[@]}" "$SV/api/pull" -d "{\"model\":\"$U/slow/m.gguf\"}" >"$T/s1.ndjson"
check "with an API key: NDJSON from 'pulling manifest' through progress to success" \
  'head -1 "$T/s1.ndjson" | grep -q "pulling manifest" && grep -q "\"completed\":" "$T/s1.ndjson" && tail -1 "$T/s1.ndjson" | grep -q "\"status\":\"success\"" || { cat "$T/s1.ndjson"; false; }'
check "the pulled model is convert's bytes, listed by /api/tags" \
  'same "$T/srv/m.rkmojo" "$cur_ref" && curl -s "${A[@]}" "$SV/api/tags" | grep -q "\"name\":\"m:latest\"" || { cat "$T/diff.log"; curl -s "${A[@]}" "$SV/api/tags"; false; }'
code=$(curl -s -o "$T/s1.gen" -w '%{http_code}' "${A[@]}" "$SV/api/generate" -d '{"model":"m","prompt":"hi","stream":false,"options":{"num_predict":3,"temperature":0}}')
check "and generates" '[ "$code" = 200 ] || { cat "$T/s1.gen"; false; }'
out=$(curl -s "${A[@]}" "$SV/api/pull" -d "{\"model\":\"$U/m.gguf\",\"stream\":false}")
check "pulling it again: success, nothing fetched" '[ "$out" = "{\"status\":\"success\"}" ] || { echo "$out"; false; }'
code=$(curl -s -o "$T/s1.e1" -w '%{http_code}' "${A[@]}" "$SV/api/pull" -d "{\"model\":\"$U/missing.gguf\",\"stream\":false}")
check "a missing file (stream false): 404 with the reason, no model" \
  '[ "$code" = 404 ] && grep -q "404" "$T/s1.e1" && [ ! -e "$T/srv/missing.rkmojo/manifest.json" ] || { echo "$code"; cat "$T/s1.e1"; false; }'
code=$(curl -s -o "$T/s1.e2" -w '%{http_code}' "${A[@]}" "$SV/api/pull" -d '{"model":"/etc/passwd"}')
check "a path on the server: refused (400)" '[ "$code" = 400 ] || { echo "$code"; cat "$T/s1.e2"; false; }'
code=$(curl -s -o "$T/s1.e3" -w '%{http_code}' "${A[@]}" "$SV/api/pull" -d "{\"model\":\"$U/a%2F..%2Fb.gguf\"}")
check "a file name that is not a plain name: refused (400)" '[ "$code" = 400 ] || { echo "$code"; cat "$T/s1.e3"; false; }'
out=$(curl -s "${A[@]}" "$SV/api/pull" -d '{"model":"hf://org/ckpt","stream":false}')
check "a safetensors checkpoint (hf://org/ckpt): success, convert's bytes, listed as ckpt" \
  '[ "$out" = "{\"status\":\"success\"}" ] && same_ck "$T/srv/ckpt.rkmojo" "$T/ck.ref" &&
   curl -s "${A[@]}" "$SV/api/tags" | grep -q "\"name\":\"ckpt:latest\"" || { echo "$out"; cat "$T/diff.log"; false; }'
cp "$T/www/m.gguf" "$T/www/other.gguf" && chmod 644 "$T/www/other.gguf"
(cd tests/js && node --input-type=module -e '
import { Ollama } from "ollama";
const [host, url] = process.argv.slice(1);
const o = new Ollama({ host, headers: { Authorization: "Bearer k3y" } });
let last, progress = 0;
for await (const p of await o.pull({ model: url, stream: true })) { last = p; if (p.completed > 0 && p.total > 0) progress++; }
const tags = await o.list();
console.log(JSON.stringify({ last: last.status, progress, listed: tags.models.some((m) => m.name === "other:latest") }));
' "$SV" "$U/slow/other.gguf") >"$T/s1.js" 2>&1
check "the ollama client pulls through it (progress, success, then listed)" \
  'grep -q "\"last\":\"success\",\"progress\":[1-9][0-9]*,\"listed\":true" "$T/s1.js" || { cat "$T/s1.js"; false; }'
for p in "${SPIDS[@]}"; do kill "$p" 2>/dev/null; done

# errors: clear, and nothing half-installed
"$BIN" pull "$U/missing.gguf" "$T/e1.rkmojo" >"$T/e1.log" 2>&1
check "404: an error naming it, no model" '[ $? != 0 ] && grep -q "404" "$T/e1.log" && no_model "$T/e1.rkmojo" || { cat "$T/e1.log"; false; }'
"$BIN" pull "$U/whole/m.gguf" "$T/e2.rkmojo" >"$T/e2.log" 2>&1
check "a server that ignores Range: said so, no model" \
  '[ $? != 0 ] && grep -q "byte ranges" "$T/e2.log" && no_model "$T/e2.rkmojo" || { cat "$T/e2.log"; false; }'
"$BIN" pull "$U/notes.txt" "$T/e3.rkmojo" >"$T/e3.log" 2>&1
check "not a GGUF: said so, no model" '[ $? != 0 ] && grep -qi "gguf" "$T/e3.log" && no_model "$T/e3.rkmojo" || { cat "$T/e3.log"; false; }'
"$BIN" pull "http://127.0.0.1:1/m.gguf" "$T/e4.rkmojo" >"$T/e4.log" 2>&1
check "nothing listening: an error, no model" '[ $? != 0 ] && grep -qi "connect" "$T/e4.log" && no_model "$T/e4.rkmojo" || { cat "$T/e4.log"; false; }'

echo "$fails failed"
[ "$fails" = 0 ]
