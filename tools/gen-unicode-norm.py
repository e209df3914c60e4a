#!/usr/bin/env python3
"""gen-unicode-norm.py - generates src/text/unicode_norm_data.c, the tables
for the compatibility normalization forms (NFKC, NFKD), the NFKC quick
check, lowercase mapping, nonspacing marks and the set of assigned code
points, from the Unicode Character Database as shipped by
Debian's `unicode-data` package (/usr/share/unicode). The canonical tables
(NFC/NFD) stay in unicode_data.c (tools/gen-unicode.py). The generated file
is committed: building rkmojo does not need the package.

Tables produced:
  rkm_ucd_kdecomp[]    {cp, offset, len}: the full NFKD of every code point
                       whose NFKD differs from its NFD (compatibility
                       mappings applied recursively, Hangul syllables
                       decomposed), sorted by cp; the code points are in
                       rkm_ucd_kdecomp_pool[] (not canonically ordered:
                       the normalizer reorders after decomposing).
  rkm_ucd_qc_nfkc[]    ranges {first, last, 1 = No, 2 = Maybe} of the
                       NFKC_QC property. (NFD_QC and NFKD_QC need no table:
                       they are No exactly for the code points with a
                       canonical, resp. any, decomposition.)
  rkm_ucd_lower[]      {cp, a, b}: lowercase mapping (UnicodeData simple
                       lowercase, plus SpecialCasing's unconditional
                       two-code-point mappings, b = second code point).
  rkm_ucd_mn[]         ranges of general category Mn (nonspacing marks).
  rkm_ucd_assigned[]   ranges of assigned code points (any category but Cn).
  RKM_UCD_NFKD_MAX_PER_BYTE: bound on NFKD code points per UTF-8 input byte.
"""
import sys, os

UCD = os.environ.get("UCD", "/usr/share/unicode")
OUT = sys.argv[1] if len(sys.argv) > 1 else "src/text/unicode_norm_data.c"

SBASE, LBASE, VBASE, TBASE = 0xAC00, 0x1100, 0x1161, 0x11A7
LCOUNT, VCOUNT, TCOUNT = 19, 21, 28
NCOUNT = VCOUNT * TCOUNT
SCOUNT = LCOUNT * NCOUNT

canon = {}
compat = {}
lower = {}
cat = {}
first = None
for line in open(os.path.join(UCD, "UnicodeData.txt"), encoding="utf-8"):
    f = line.rstrip("\n").split(";")
    cp = int(f[0], 16)
    name, gc = f[1], f[2]
    if name.endswith(", First>"):
        first = cp
        continue
    lo = first if name.endswith(", Last>") else cp
    first = None
    for c in range(lo, cp + 1):
        cat[c] = gc
    if f[5]:
        if f[5].startswith("<"):
            compat[cp] = [int(x, 16) for x in f[5].split()[1:]]
        else:
            canon[cp] = [int(x, 16) for x in f[5].split()]
    if f[13]:
        lower[cp] = [int(f[13], 16)]

# SpecialCasing: unconditional lowercase mappings (no condition field)
for line in open(os.path.join(UCD, "SpecialCasing.txt"), encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    f = [x.strip() for x in line.split(";")]
    if len(f) >= 5 and f[4]:
        continue  # conditional (Final_Sigma, language-specific)
    cp = int(f[0], 16)
    lo = [int(x, 16) for x in f[1].split()]
    if lo != [cp]:
        lower[cp] = lo

def hangul(c):
    s = c - SBASE
    out = [LBASE + s // NCOUNT, VBASE + (s % NCOUNT) // TCOUNT]
    if s % TCOUNT:
        out.append(TBASE + s % TCOUNT)
    return out

def full(c, k):
    if SBASE <= c < SBASE + SCOUNT:
        return hangul(c)
    d = canon.get(c) or (compat.get(c) if k else None)
    if not d:
        return [c]
    out = []
    for x in d:
        out += full(x, k)
    return out

def utf8len(c):
    return 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4

kdecomp = {}
max_per_byte = 1
for c in sorted(set(canon) | set(compat)):
    kd = full(c, True)
    if kd != full(c, False):
        kdecomp[c] = kd
    n = max(len(kd), len(full(c, False)))
    max_per_byte = max(max_per_byte, -(-n // utf8len(c)))
for c in range(SBASE, SBASE + SCOUNT):
    max_per_byte = max(max_per_byte, -(-len(hangul(c)) // 3))

def qc(prop):
    out = []
    for line in open(os.path.join(UCD, "DerivedNormalizationProps.txt"), encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        f = [x.strip() for x in line.split(";")]
        if len(f) != 3 or f[1] != prop:
            continue
        a, b = (f[0].split("..") + [f[0]])[:2]
        out.append((int(a, 16), int(b, 16), 1 if f[2] == "N" else 2))
    return sorted(out)

def ranges(pred):
    out = []
    cur = None
    for c in range(0x110000):
        if pred(c):
            if cur and cur[1] == c - 1:
                cur[1] = c
            else:
                if cur:
                    out.append(cur)
                cur = [c, c]
        elif cur:
            out.append(cur)
            cur = None
    if cur:
        out.append(cur)
    return out

mn = ranges(lambda c: cat.get(c) == "Mn")
assigned = ranges(lambda c: c in cat and cat[c] != "Cn")

version = "?"
for line in open(os.path.join(UCD, "DerivedAge.txt"), encoding="utf-8"):
    version = line.strip("# \n").replace("DerivedAge-", "Unicode ").replace(".txt", "")
    break

with open(OUT, "w") as o:
    o.write("/*\n * unicode_norm_data.c - GENERATED by tools/gen-unicode-norm.py from the\n"
            " * Unicode Character Database (%s). Do not edit; rerun the script.\n"
            " * Read-only tables, shared by all threads; see unicode.h for their use.\n */\n" % version)
    o.write('#include "text/unicode.h"\n\n')
    pool = []
    o.write("const rkm_ucd_kdecomp_entry rkm_ucd_kdecomp[] = {\n")
    for c in sorted(kdecomp):
        d = kdecomp[c]
        o.write("    {0x%X, %d, %d},\n" % (c, len(pool), len(d)))
        pool += d
    o.write("};\nconst int rkm_ucd_n_kdecomp = %d;\n\n" % len(kdecomp))
    o.write("const uint32_t rkm_ucd_kdecomp_pool[] = {\n")
    for i in range(0, len(pool), 10):
        o.write("    " + " ".join("0x%X," % x for x in pool[i:i + 10]) + "\n")
    o.write("};\nconst int rkm_ucd_n_kdecomp_pool = %d;\n\n" % len(pool))
    for name, prop in (("nfkc", "NFKC_QC"),):
        r = qc(prop)
        o.write("const rkm_ucd_range rkm_ucd_qc_%s[] = {\n" % name)
        for a, b, v in r:
            o.write("    {0x%X, 0x%X, %d},\n" % (a, b, v))
        o.write("};\nconst int rkm_ucd_n_qc_%s = %d;\n\n" % (name, len(r)))
    o.write("const rkm_ucd_decomp_entry rkm_ucd_lower[] = {\n")
    for c in sorted(lower):
        lo = lower[c]
        o.write("    {0x%X, 0x%X, 0x%X},\n" % (c, lo[0], lo[1] if len(lo) > 1 else 0))
    o.write("};\nconst int rkm_ucd_n_lower = %d;\n\n" % len(lower))
    for name, r in (("mn", mn), ("assigned", assigned)):
        o.write("const rkm_ucd_range rkm_ucd_%s[] = {\n" % name)
        for a, b in r:
            o.write("    {0x%X, 0x%X, 1},\n" % (a, b))
        o.write("};\nconst int rkm_ucd_n_%s = %d;\n\n" % (name, len(r)))
    o.write("const int rkm_ucd_nfkd_max_per_byte = %d;\n" % max_per_byte)
print("wrote", OUT, len(kdecomp), "compatibility decompositions,", len(pool), "pool entries,",
      len(lower), "lowercase mappings,", len(mn), "Mn ranges,", len(assigned), "assigned ranges, max",
      max_per_byte, "code points per byte")
