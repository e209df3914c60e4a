#!/usr/bin/env bash
# The layers of src/ and their order: every folder of src/ has a place in
# the Makefile's LAYERS (lowest first), then cli/ on top. A file may
# include headers of its own folder and of folders below it, and
# include/rkmojo.h (declarations only, it includes nothing of src/), never
# one above. Within and across folders the modules (a .c/.h pair, by path
# without extension) must form no cycle of includes. Exits 1 naming each
# include that points up and each cycle; the check has no exception list.
set -u
cd "$(dirname "$0")/.."
read -r -a order <<<"$(sed -n 's/^LAYERS *:= *//p' Makefile) cli"
[ ${#order[@]} -ge 3 ] || { echo "no LAYERS line in the Makefile"; exit 1; }
declare -A rank
for i in "${!order[@]}"; do rank[${order[$i]}]=$i; done
fail=0
for d in src/*/; do
  d=${d#src/}; d=${d%/}
  [ -n "${rank[$d]:-}" ] || { echo "src/$d/ has no place in the Makefile's LAYERS"; fail=1; }
done
if grep -n '#include "' include/rkmojo.h | grep -v '"rkmojo.h"' ; then
  echo "include/rkmojo.h includes a header of src/"; fail=1
fi
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
while IFS= read -r f; do
  layer=${f#src/}; layer=${layer%%/*}
  mod=${f%.*}
  while IFS= read -r inc; do
    [ "$inc" = rkmojo.h ] && continue
    case "$inc" in
      */*) target=src/$inc ;;
      *) target=$(dirname "$f")/$inc ;;
    esac
    if [ ! -f "$target" ]; then echo "$f: #include \"$inc\": no such header"; fail=1; continue; fi
    tl=${target#src/}; tl=${tl%%/*}
    if [ "${rank[$tl]:-99}" -gt "${rank[$layer]:-99}" ]; then
      echo "$f: #include \"$inc\" points up ($layer includes $tl)"; fail=1
    fi
    tm=${target%.*}
    [ "$tm" != "$mod" ] && echo "$mod $tm" >>"$edges"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find src -name '*.[ch]' | sort)
if ! out=$(sort -u "$edges" | tsort 2>&1 >/dev/null); then
  echo "include cycle between modules:"; echo "$out" | sed 's/^tsort: //'; fail=1
fi
n=$(find src -name '*.[ch]' | wc -l)
if [ $fail -eq 0 ]; then echo "layers: ${order[*]}; $n files, every include points down, no cycle"; fi
exit $fail
