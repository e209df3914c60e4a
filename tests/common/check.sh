# check.sh - sourced by the end-to-end server scripts (test-server.sh,
# test-nginx.sh): named checks counted in $fails, and a JSON field reader.
#
#   check "what" 'shell condition'   ok or FAIL with the name, counts fails
#   jget a.0.b < json                 a field by dotted path (arrays by index)
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
jget() {
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let v;try{v=process.argv[1].split(".").reduce((a,k)=>a==null?a:a[k],JSON.parse(s))}catch(e){v="<not json>"}console.log(v!==null&&typeof v==="object"?JSON.stringify(v):String(v))})' "$1"
}
