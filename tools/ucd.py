"""ucd.py - readers of the Unicode Character Database files (Debian's
`unicode-data` package, /usr/share/unicode, or $UCD) shared by
gen-unicode.py and gen-unicode-norm.py."""
import os

UCD = os.environ.get("UCD", "/usr/share/unicode")


def path(name):
    return os.path.join(UCD, name)


def unicode_data():
    """Yields (lo, hi, fields) for each record of UnicodeData.txt: fields
    are the line's 15 fields; a "<..., First>" / "<..., Last>" pair is one
    record for the range lo..hi (the fields of its Last line), any other
    line a record with lo == hi."""
    first = None
    for line in open(path("UnicodeData.txt"), encoding="utf-8"):
        f = line.rstrip("\n").split(";")
        cp = int(f[0], 16)
        if f[1].endswith(", First>"):
            first = cp
            continue
        lo = first if f[1].endswith(", Last>") else cp
        first = None
        yield lo, cp, f


def special_casing():
    """Yields (cp, lower, title, upper) for each unconditional mapping of
    SpecialCasing.txt (no condition field: Final_Sigma and the
    language-specific ones are left out); each mapping a list of code
    points."""
    for line in open(path("SpecialCasing.txt"), encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        f = [x.strip() for x in line.split(";")]
        if len(f) >= 5 and f[4]:
            continue
        cps = [[int(x, 16) for x in f[k].split()] for k in (1, 2, 3)]
        yield int(f[0], 16), cps[0], cps[1], cps[2]


def qc_ranges(prop):
    """Sorted (first, last, 1 = No, 2 = Maybe) ranges of a quick-check
    property (NFC_QC, NFKC_QC) of DerivedNormalizationProps.txt."""
    out = []
    for line in open(path("DerivedNormalizationProps.txt"), encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        f = [x.strip() for x in line.split(";")]
        if len(f) != 3 or f[1] != prop:
            continue
        a, b = (f[0].split("..") + [f[0]])[:2]
        out.append((int(a, 16), int(b, 16), 1 if f[2] == "N" else 2))
    return sorted(out)


def version():
    """"Unicode X.Y.Z", from the first line of DerivedAge.txt."""
    for line in open(path("DerivedAge.txt"), encoding="utf-8"):
        return line.strip("# \n").replace("DerivedAge-", "Unicode ").replace(".txt", "")
    return "?"
