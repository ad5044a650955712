#!/usr/bin/env python3
"""Structure counts of mha.h's implementation (issue "one door"): its lines, its functions and
their lengths (the longest listed), and the preprocessor conditionals inside function bodies.
Usage: tests/structure.py [mha.h] [--top N]. Plain Python, no modules.

A function is a definition at brace depth 0 whose header ends in ')' and whose body opens with
'{'; its length is from the header's first line to the closing brace. Comments, strings and
character constants are blanked first; #define lines (with their continuations) are not code.
"""
import re
import sys


def blank(text):
    """Comments, strings and character constants replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = 10
    for a in sys.argv[1:]:
        if a.startswith("--top="):
            top = int(a.split("=", 1)[1])
    path = args[0] if args else "mha.h"
    raw = open(path, encoding="utf-8").read()
    lines = blank(raw).split("\n")
    impl = next((i for i, l in enumerate(raw.split("\n")) if re.match(r"#if(def)?\s*.*MHA_IMPLEMENTATION", l)), 0)
    depth, funcs, ifs_in_bodies, ifs_total = 0, [], 0, 0
    start, name, in_define = None, None, False
    header = []  # the non-blank lines since the last statement at depth 0
    for no, l in enumerate(lines):
        s = l.strip()
        if in_define or s.startswith("#"):
            if re.match(r"#\s*if", s) and no >= impl:
                ifs_total += 1
                if depth > 0 and name:  # inside a function's body (not a struct's)
                    ifs_in_bodies += 1
            in_define = s.endswith("\\")
            continue
        if re.match(r'extern\s+"\s*"\s*\{', s):  # extern "C" {: not a depth (its '}' is ignored at depth 0)
            continue
        for ch in l:
            if ch == "}" and depth == 0:
                continue
            if ch == "{":
                if depth == 0:
                    h = " ".join(header + [l.split("{")[0]]).strip()
                    m = re.search(r"(\w+)\s*\([^;]*\)\s*$", h)
                    if m and not re.search(r"=\s*$|\b(struct|union|enum)\b[^(]*$", h) and "=" not in h.split("(")[0]:
                        name = m.group(1)
                        start = no - len(header)
                    else:
                        name = None
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and name:
                    if start >= impl:
                        funcs.append((no - start + 1, name, start + 1))
                    name = None
        if depth == 0:
            if s.endswith(";") or s.endswith("}") or not s:
                header = []
            else:
                header.append(s)
                header = header[-6:]
    funcs.sort(reverse=True)
    print("%s: %d lines (implementation from line %d)" % (path, len(raw.split("\n")) - 1, impl + 1))
    print("functions in the implementation: %d; over 80 lines: %d" % (len(funcs), sum(1 for f in funcs if f[0] > 80)))
    print("preprocessor conditionals in the implementation: %d, inside function bodies: %d" % (ifs_total, ifs_in_bodies))
    print("longest functions:")
    for length, fname, at in funcs[:top]:
        print("  %4d  %s (line %d)" % (length, fname, at))


if __name__ == "__main__":
    main()
