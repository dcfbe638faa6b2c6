#!/usr/bin/env python3
"""Cycles among the modules of each workspace crate, at every level.

For each folder module (the crate root, `pipeline/`, `pipeline/stages/`,
…) the graph has its child modules; child A -> child B when a file of A
names a path into B (`crate::…::B`, `super::B`, `self::B`, in a `use`
or in code, groups in braces too, resolved from the file's own place).
Prints each level's strongly connected components of more than one
module; exits 1 when any crate has one (issue 27: "no cycle among
modules inside any crate").

    python3 scripts/module_cycles.py [CRATE_DIR...]
"""
import os
import re
import sys



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


PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)(?:::\{([^{}]*)\})?")


def module_path(src, path):
    """A file's module path: `src/a/b.rs` and `src/a/b/mod.rs` are a::b."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def references(src, path):
    """Every module path the file names, resolved from `crate::`,
    `super::` and `self::` (groups in braces too)."""
    here = module_path(src, path)
    text = strip_tests(open(path, encoding="utf-8").read())
    # Comments name modules without standing on them (rustdoc links).
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
    out = []
    for root, tail, group in PATH.findall(text):
        parts = [p for p in tail.split("::") if p]
        if root == "crate":
            base = []
        elif root == "self":
            base = list(here)
        else:
            base = here[:-1]
            while parts and parts[0] == "super":
                parts.pop(0)
                base = base[:-1]
        heads = [parts]
        if group:
            heads = [parts + [item.strip().split("::")[0]] for item in group.split(",") if item.strip()]
        for h in heads:
            out.append(base + [x for x in h if x not in ("self",)])
    return here, out


def levels(src):
    """Each folder module of the crate (the crate root first) and its
    children: the levels whose modules must not stand on each other in a
    circle."""
    for folder, dirs, files in os.walk(src):
        rel = os.path.relpath(folder, src)
        prefix = [] if rel == "." else rel.split(os.sep)
        children = {f[:-3] for f in files if f.endswith(".rs") and f not in ("mod.rs", "lib.rs", "main.rs")}
        children |= set(dirs)
        if len(children) > 1:
            yield prefix, children


def graph(src, prefix=(), mods=None):
    prefix = list(prefix)
    if mods is None:
        mods = top_modules(src)
    edges = {m: set() for m in mods}
    for root, _, names in os.walk(src):
        for name in names:
            path = os.path.join(root, name)
            if not name.endswith(".rs") or name == "tests.rs":
                continue
            here, refs = references(src, path)
            if here[: len(prefix)] != prefix or len(here) <= len(prefix):
                continue
            module = here[len(prefix)]
            if module not in edges:
                continue
            for target in refs:
                if target[: len(prefix)] != prefix or len(target) <= len(prefix):
                    continue
                to = target[len(prefix)]
                if to in mods and to != module:
                    edges[module].add(to)
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
        checked = 0
        for prefix, children in levels(src):
            checked += 1
            for comp in components(graph(src, prefix, children)):
                found += 1
                where = "::".join(prefix) or "the crate root"
                print(f"{crate}: a cycle among {len(comp)} of the {len(children)} modules of {where}: {', '.join(comp)}")
        modules = len(top_modules(src))
        print(f"{crate}: {modules} top-level modules, {checked} folders checked")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
