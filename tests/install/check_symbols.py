#!/usr/bin/env python3
"""The shared library's exported functions must be exactly those declared RG_API in the public
headers: one more is an internal that leaked (the build lost -fvisibility=hidden), one fewer is a
public function users cannot call.

    check_symbols.py build/libringgrad.so include/
"""
import pathlib
import re
import subprocess
import sys


def declared(include_dir):
    names = set()
    for h in pathlib.Path(include_dir).rglob("*.h"):
        text = re.sub(r"/\*.*?\*/", " ", h.read_text(), flags=re.S)
        # RG_API <return type and qualifiers> rg_name(   -- the declaration may span lines
        for m in re.finditer(r"\bRG_API\b([^;{}()]*?)\b(rg_\w+)\s*\(", text):
            names.add(m.group(2))
    return names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    return {f[2] for f in (line.split() for line in out.splitlines())
            if len(f) == 3 and f[1] in "TW"}


def main():
    lib, inc = sys.argv[1], sys.argv[2]
    api, syms = declared(inc), exported(lib)
    leaked = sorted(syms - api)
    missing = sorted(api - syms)
    if leaked:
        print(f"{len(leaked)} exported symbols are not RG_API in {inc}:", *leaked[:40], sep="\n  ")
    if missing:
        print(f"{len(missing)} RG_API functions are not exported by {lib}:", *missing[:40],
              sep="\n  ")
    if leaked or missing or len(api) < 50:
        sys.exit(1)
    print(f"ok: {len(syms)} exported functions, all and only the RG_API ones")


if __name__ == "__main__":
    main()
