#!/usr/bin/env python3
"""modcycles.py SRC...: fails when the top-level modules of a crate's `src` import each other
in a cycle. A top-level module is `src/X.rs` or `src/X/`; it imports X when its files (test code
left out: `#[cfg(test)]` items, `tests.rs`, `*_tests.rs`) name a `crate::X` path."""
import re
import sys
from pathlib import Path

PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def without_tests(text: str) -> str:
    out, i = [], 0
    while (j := text.find("#[cfg(test)]", i)) >= 0:
        out.append(text[i:j])
        brace, semi = text.find("{", j), text.find(";", j)
        if brace < 0 or 0 <= semi < brace:
            i = semi + 1 if semi >= 0 else len(text)
            continue
        depth, k = 0, brace
        for k in range(brace, len(text)):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                break
        i = k + 1
    out.append(text[i:])
    return "".join(out)


def imports(src: Path) -> dict[str, set[str]]:
    mods = {p.stem for p in src.glob("*.rs")} | {p.name for p in src.iterdir() if p.is_dir()}
    mods -= {"lib", "main"}
    edges = {m: set() for m in mods}
    for m in mods:
        files = [src / f"{m}.rs"] if (src / f"{m}.rs").exists() else []
        files += sorted((src / m).rglob("*.rs")) if (src / m).is_dir() else []
        for f in files:
            if f.name == "tests.rs" or f.name.endswith("_tests.rs"):
                continue
            names = PATH.findall(without_tests(f.read_text(errors="replace")))
            edges[m] |= {x for x in names if x in mods and x != m}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on.add(m)
        for x in edges[m]:
            if x not in index:
                visit(x)
                low[m] = min(low[m], low[x])
            elif x in on:
                low[m] = min(low[m], index[x])
        if low[m] == index[m]:
            part = []
            while True:
                x = stack.pop()
                on.discard(x)
                part.append(x)
                if x == m:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    return found


failed = False
for src in map(Path, sys.argv[1:]):
    for part in cycles(imports(src)):
        print(f"{src}: import cycle among {' '.join(part)}")
        failed = True
sys.exit(1 if failed else 0)
