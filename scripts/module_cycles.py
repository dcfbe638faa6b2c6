#!/usr/bin/env python3
"""Cycles among the top-level modules of each workspace crate.

The graph: module A -> module B when a file of A names `crate::B` (a
`use`, or a path in code). Top-level modules are `src/<name>.rs` and
`src/<name>/`. Prints each crate's strongly connected components of more
than one module; exits 1 when any crate has one (issue 27: "no cycle
among modules inside any crate").

    python3 scripts/module_cycles.py [CRATE_DIR...]
"""
import os
import re
import sys

USE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def top_modules(src):
    mods = set()
    for entry in os.listdir(src):
        if entry.endswith(".rs") and entry not in ("lib.rs", "main.rs"):
            mods.add(entry[:-3])
        elif os.path.isdir(os.path.join(src, entry)):
            mods.add(entry)
    return mods


def files_of(src, module):
    path = os.path.join(src, module + ".rs")
    if os.path.exists(path):
        yield path
    folder = os.path.join(src, module)
    if os.path.isdir(folder):
        for root, _, names in os.walk(folder):
            for name in names:
                if name.endswith(".rs"):
                    yield os.path.join(root, name)


def strip_tests(text):
    # What `#[cfg(test)] mod tests { … }` names is not the module's design.
    at = text.find("#[cfg(test)]")
    return text if at < 0 else text[:at]


def graph(src):
    mods = top_modules(src)
    edges = {m: set() for m in mods}
    for module in mods:
        for path in files_of(src, module):
            if os.path.basename(path) == "tests.rs":
                continue
            text = strip_tests(open(path, encoding="utf-8").read())
            # Comments name modules without standing on them (rustdoc links).
            text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
            for target in USE.findall(text):
                if target in mods and target != module:
                    edges[module].add(target)
    return edges


def components(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    crates = sys.argv[1:] or sorted(
        d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "Cargo.toml"))
    )
    found = 0
    for crate in crates:
        src = os.path.join(root, crate, "src")
        if not os.path.isdir(src):
            continue
        cycles = components(graph(src))
        modules = len(top_modules(src))
        if cycles:
            found += len(cycles)
            for comp in cycles:
                print(f"{crate}: a cycle among {len(comp)} of its {modules} modules: {', '.join(comp)}")
        else:
            print(f"{crate}: {modules} modules, no cycle")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
