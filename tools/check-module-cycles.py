#!/usr/bin/env python3
"""Check that the top-level modules of the Rust crate import one another
without a cycle.

A top-level module is a file src/rust/src/NAME.rs or a folder
src/rust/src/NAME/ (with mod.rs); lib.rs is the crate root, not a module.
Every file inside a folder belongs to that folder's module (NAME/sub.rs and
NAME/sub/deeper.rs belong to NAME).

For every .rs file, comments, string literals (raw ones too) and character
literals are blanked out first; then every path that starts with crate:: or
super:: is read, in use declarations (brace groups included, nested ones
too) and inline in code. super:: is resolved against the module path of the
file (foo/bar.rs is foo::bar, foo/mod.rs is foo), and of any inline
`mod name { ... }` block the path is written in (e.g. #[cfg(test)] mod
tests), then mapped to its top-level module. An edge from a module to
itself is ignored; test code counts the same as other code.

The strongly connected components of the graph of top-level modules are
found with Tarjan's algorithm. Each one with more than one module is a
cycle: its modules, short cycles through them, and for each edge inside it the
file:line locations that create it are printed, and the exit status is 1.
(A component holds many cycles: a shortest one through each of its modules
is shown.) Otherwise one line is printed and the exit status is 0.

Usage:
  tools/check-module-cycles.py [--root DIR] [--dot]
  tools/check-module-cycles.py --self-test

--root DIR   the crate's source folder (default: src/rust/src of the
             repository this script is in)
--dot        also print the graph in Graphviz DOT format (on stdout; the
             verdict then goes to stderr)
--self-test  check the checker on small temporary trees
"""

import argparse
import collections
import os
import re
import sys
import tempfile

# How many locations to show per edge of a cycle.
LOCATIONS_SHOWN = 5

IDENT_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


# --- Lexing -----------------------------------------------------------------


def strip_comments_and_literals(text):
    """Return text with comments, string literals and character literals
    replaced by spaces (newlines kept, so line numbers stay right).
    String literals keep their quotes, so `"..."` becomes `"   "`."""
    out = []
    n = len(text)
    i = 0

    def blank(chunk):
        return "".join(c if c == "\n" else " " for c in chunk)

    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        prev = text[i - 1] if i > 0 else ""
        # Line comments, doc comments (/// and //!) included.
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            if j < 0:
                j = n
            out.append(blank(text[i:j]))
            i = j
            continue
        # Block comments, which nest in Rust.
        if c == "/" and nxt == "*":
            depth = 1
            j = i + 2
            while j < n and depth > 0:
                if text.startswith("/*", j):
                    depth += 1
                    j += 2
                elif text.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
            continue
        # Raw strings: r"..", r#".."#, br"..", br#".."# (not raw identifiers r#name).
        if c in "rb" and prev not in IDENT_CHARS:
            m = re.compile(r'(br|r)(#*)"').match(text, i)
            if m:
                hashes = m.group(2)
                close = '"' + hashes
                j = text.find(close, m.end())
                j = n if j < 0 else j + len(close)
                out.append(blank(text[i:j]))
                i = j
                continue
        # Ordinary (and byte, b"...") string literals.
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('"' + blank(text[i + 1:j - 1]) + '"')
            i = j
            continue
        # Character literals ('x', '\n', '\'', '\u{..}', b'x'); a quote that
        # starts none of these is a lifetime or a label and is kept.
        if c == "'":
            if nxt == "\\":
                j = i + 3  # past the quote, the backslash and the escaped char
                while j < n and text[j] != "'" and text[j] != "\n":
                    j += 1
                if j < n and text[j] == "'":
                    out.append(blank(text[i:j + 1]))
                    i = j + 1
                    continue
            elif i + 2 < n and text[i + 2] == "'" and nxt != "\n":
                out.append("   ")
                i += 3
                continue
        out.append(c)
        i += 1
    return "".join(out)


TOKEN_RE = re.compile(r"r#[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*|::|\S")


def tokenize(stripped):
    """(token, line) pairs; identifiers, '::' and single punctuation marks."""
    tokens = []
    for lineno, line in enumerate(stripped.split("\n"), start=1):
        for m in TOKEN_RE.finditer(line):
            tok = m.group(0)
            if tok.startswith("r#"):
                tok = tok[2:]
            elif tok[0].isdigit():
                continue
            tokens.append((tok, lineno))
    return tokens


def is_ident(tok):
    return tok[0].isalpha() or tok[0] == "_"


# --- Reading paths ------------------------------------------------------------


def parse_use_tree(tokens, i, prefix, found):
    """Parse one use tree starting at tokens[i]; append every full path
    (a list of segments, with the line of its last segment) to found.
    Returns the index just past the tree."""
    segs = list(prefix)
    line = tokens[i][1] if i < len(tokens) else 0
    if i < len(tokens) and tokens[i][0] == "::":  # `use ::std::..`
        i += 1
    while i < len(tokens):
        tok, line = tokens[i]
        if tok == "{":
            i += 1
            while i < len(tokens) and tokens[i][0] != "}":
                if tokens[i][0] == ",":
                    i += 1
                    continue
                before = i
                i = parse_use_tree(tokens, i, segs, found)
                if i == before:  # something unexpected: skip it
                    i += 1
            return i + 1
        if tok == "*":
            found.append((segs, line))
            return i + 1
        if is_ident(tok):
            segs.append(tok)
            i += 1
            if i < len(tokens) and tokens[i][0] == "::":
                i += 1
                continue
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            found.append((segs, line))
            if i + 1 < len(tokens) and tokens[i][0] == "as":
                i += 2
            return i
        return i
    return i


def read_paths(text):
    """Every path in the code that starts with crate::, $crate:: or super::,
    as (segments, line, inline module stack) triples, where the stack lists
    the inline `mod name {` blocks the path is written in."""
    tokens = tokenize(strip_comments_and_literals(text))
    paths = []
    depth = 0
    inline = []  # (name, brace depth at which the block's `{` opened)
    i = 0
    n = len(tokens)
    while i < n:
        tok, line = tokens[i]
        if tok == "{":
            depth += 1
            i += 1
            continue
        if tok == "}":
            depth -= 1
            while inline and inline[-1][1] > depth:
                inline.pop()
            i += 1
            continue
        if tok == "mod" and i + 2 < n and is_ident(tokens[i + 1][0]) and tokens[i + 2][0] == "{":
            inline.append((tokens[i + 1][0], depth + 1))
            depth += 1
            i += 3
            continue
        if tok == "use" and (i == 0 or tokens[i - 1][0] != "::"):
            found = []
            j = parse_use_tree(tokens, i + 1, [], found)
            for segs, where in found:
                if segs and segs[0] in ("crate", "super", "self"):
                    paths.append((segs, where, [m for m, _ in inline]))
            i = max(j, i + 1)
            continue
        if tok in ("crate", "super") and i + 1 < n and tokens[i + 1][0] == "::" and (
            i == 0 or tokens[i - 1][0] != "::"
        ):
            segs = [tok]
            j = i + 2
            while j < n and is_ident(tokens[j][0]):
                segs.append(tokens[j][0])
                if j + 1 < n and tokens[j + 1][0] == "::":
                    j += 2
                else:
                    j += 1
                    break
            paths.append((segs, line, [m for m, _ in inline]))
            i = j
            continue
        i += 1
    return paths


def resolve(segs, module_path):
    """The absolute path (a list of segments) that segs names when written
    in the module module_path, or None if it climbs above the crate root."""
    current = list(module_path)
    k = 0
    while k < len(segs) and segs[k] in ("crate", "super", "self"):
        if segs[k] == "crate":
            current = []
        elif segs[k] == "super":
            if not current:
                return None
            current.pop()
        k += 1
    return current + list(segs[k:])


# --- The crate ------------------------------------------------------------------


def crate_files(root):
    """(relative path, module path) for every .rs file under root; the
    module path is a list of segments (empty for lib.rs)."""
    result = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            parts = rel.split(os.sep)
            parts[-1] = parts[-1][:-3]
            if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
                parts = parts[:-1]
            result.append((rel, parts))
    return result


def top_level_modules(root):
    modules = set()
    for name in os.listdir(root):
        full = os.path.join(root, name)
        if os.path.isfile(full) and name.endswith(".rs") and name not in ("lib.rs", "main.rs"):
            modules.add(name[:-3])
        elif os.path.isdir(full) and os.path.isfile(os.path.join(full, "mod.rs")):
            modules.add(name)
    return modules


def build_graph(root):
    """(modules, edges), where edges maps (from, to) to a list of
    "file:line" locations."""
    modules = top_level_modules(root)
    edges = collections.defaultdict(list)
    for rel, module_path in crate_files(root):
        if not module_path:
            continue  # the crate root is not a module
        source = module_path[0]
        if source not in modules:
            continue  # e.g. a folder without mod.rs whose NAME.rs is missing
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        for segs, line, inline in read_paths(text):
            target = resolve(segs, module_path + inline)
            if not target or target[0] not in modules or target[0] == source:
                continue
            where = "%s:%d" % (rel.replace(os.sep, "/"), line)
            if where not in edges[(source, target[0])]:
                edges[(source, target[0])].append(where)
    return modules, dict(edges)


def strongly_connected(modules, edges):
    """Tarjan's algorithm (iterative); the components, each sorted."""
    succ = collections.defaultdict(list)
    for a, b in sorted(edges):
        succ[a].append(b)
    index = {}
    low = {}
    on_stack = set()
    stack = []
    components = []
    counter = 0
    for start in sorted(modules):
        if start in index:
            continue
        work = [(start, 0)]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, k = work[-1]
            if k < len(succ[v]):
                work[-1] = (v, k + 1)
                w = succ[v][k]
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    components.append(sorted(component))
    return components


def shortest_cycle(component, edges, start):
    """One shortest cycle through start inside the component, as a list of
    modules that starts and ends with it."""
    members = set(component)
    succ = collections.defaultdict(list)
    for a, b in sorted(edges):
        if a in members and b in members:
            succ[a].append(b)
    parent = {}
    queue = collections.deque([start])
    seen = {start}
    while queue:
        v = queue.popleft()
        for w in succ[v]:
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [start]
            if w not in seen:
                seen.add(w)
                parent[w] = v
                queue.append(w)
    return [start]


def cycles(modules, edges):
    return [c for c in strongly_connected(modules, edges) if len(c) > 1]


def report(modules, edges, out):
    """Print the verdict; return the exit status."""
    found = sorted(cycles(modules, edges))
    if not found:
        print(
            "module import check: %d top-level modules, %d edges, no cycle"
            % (len(modules), len(edges)),
            file=out,
        )
        return 0
    print(
        "module import check: %d top-level modules, %d edges, %d cycle(s) "
        "(strongly connected components):" % (len(modules), len(edges), len(found)),
        file=out,
    )
    for number, component in enumerate(found, start=1):
        members = set(component)
        print(file=out)
        print(
            "strongly connected component %d (%d modules): %s"
            % (number, len(component), ", ".join(component)),
            file=out,
        )
        # A shortest cycle through each of its modules, each shown once.
        shown_cycles = []
        for start in component:
            path = shortest_cycle(component, edges, start)[:-1]
            k = path.index(min(path))
            path = path[k:] + path[:k]
            if path not in shown_cycles:
                shown_cycles.append(path)
        for path in sorted(shown_cycles, key=lambda p: (len(p), p)):
            print("  cycle: %s" % " -> ".join(path + path[:1]), file=out)
        print("  edges inside it (file:line of the paths that make them):", file=out)
        for (a, b), where in sorted(edges.items()):
            if a in members and b in members:
                more = len(where) - LOCATIONS_SHOWN
                shown = ", ".join(where[:LOCATIONS_SHOWN])
                if more > 0:
                    shown += " (and %d more)" % more
                print("    %s -> %s: %s" % (a, b, shown), file=out)
    return 1


def dot(modules, edges):
    in_cycle = set()
    for component in cycles(modules, edges):
        in_cycle.update(component)
    lines = ["digraph modules {"]
    for m in sorted(modules):
        attr = " [color=red]" if m in in_cycle else ""
        lines.append('  "%s"%s;' % (m, attr))
    for a, b in sorted(edges):
        attr = " [color=red]" if a in in_cycle and b in in_cycle else ""
        lines.append('  "%s" -> "%s"%s; // %d' % (a, b, attr, len(edges[(a, b)])))
    lines.append("}")
    return "\n".join(lines)


# --- Self-test ------------------------------------------------------------------


SELF_TESTS = [
    (
        "cycle via use crate::a::x and inline crate::b::y",
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "pub fn x() {}\n\npub fn f() {\n    crate::b::y();\n}\n",
            "b.rs": "use crate::a::x;\npub fn y() { x() }\n",
        },
        [["a", "b"]],
        {("a", "b"): ["a.rs:4"], ("b", "a"): ["b.rs:1"]},
    ),
    (
        "cycle only via super::super:: (and inside an inline test module)",
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a/mod.rs": "mod sub;\n",
            "a/sub.rs": "pub fn f() {\n    super::super::b::g();\n}\n",
            "b/mod.rs": "mod deep;\npub fn g() {}\n",
            "b/deep.rs": "#[cfg(test)]\nmod tests {\n    use super::super::super::a::h;\n}\n",
        },
        [["a", "b"]],
        {("a", "b"): ["a/sub.rs:2"], ("b", "a"): ["b/deep.rs:3"]},
    ),
    (
        "brace-group imports, nested, with super:: inside a group",
        {
            "lib.rs": "mod a;\nmod b;\nmod c;\nmod util;\n",
            "a.rs": "use crate::{\n    util::x,\n    b::{y, z as w},\n};\n",
            "b.rs": "pub fn y() {}\n",
            "c/mod.rs": "mod d;\n",
            "c/d.rs": "use super::{local, super::b::{self, q}};\nfn local() {}\n",
            "util.rs": "use crate::c::{self as other};\npub fn x() {}\n",
        },
        [],
        {
            ("a", "util"): ["a.rs:2"],
            ("a", "b"): ["a.rs:3"],
            ("c", "b"): ["c/d.rs:1"],
            ("util", "c"): ["util.rs:1"],
        },
    ),
    (
        "brace-group import closing a cycle",
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::{b::{y, z}};\n",
            "b.rs": "pub use super::{a::*};\n",
        },
        [["a", "b"]],
        {("a", "b"): ["a.rs:1"], ("b", "a"): ["b.rs:1"]},
    ),
    (
        "paths in comments, strings and char literals do not count",
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": (
                "// use crate::b::x;\n"
                "/// See crate::b::doc.\n"
                "//! crate::b::inner\n"
                "/* crate::b::y /* nested */ crate::b::z */\n"
                'const S: &str = "crate::b::s";\n'
                'const E: &str = "\\"crate::b::esc\\"";\n'
                'const R: &str = r#"crate::b::"raw"#;\n'
                'const B: &[u8] = br"crate::b::bytes";\n'
                "const Q: char = '\"';\n"
                "const O: char = '{';\n"
                "fn f<'a>(x: &'a str) -> &'a str { x }\n"
                "#[cfg(test)]\n"
                "mod tests {\n"
                "    use super::f;\n"
                "}\n"
                "pub fn x() {}\n"
            ),
            "b.rs": "use crate::a::x;\n",
        },
        [],
        {("b", "a"): ["b.rs:1"]},
    ),
    (
        "super:: inside an inline mod tests block resolves to the file's own module",
        {
            "lib.rs": "mod a;\nmod x;\n",
            "a/mod.rs": "pub(crate) mod sub;\n",
            "a/sub.rs": (
                "pub fn f() {}\n"
                "#[cfg(test)]\n"
                "mod tests {\n"
                "    fn t() {\n"
                "        super::super::x::y();\n"
                "    }\n"
                "}\n"
            ),
            "a/x.rs": "pub fn y() {}\n",
            "x.rs": "pub fn g() { crate::a::sub::f() }\n",
        },
        [],
        {("x", "a"): ["x.rs:1"]},
    ),
    (
        "an acyclic tree",
        {
            "lib.rs": "mod a;\nmod b;\nmod c;\npub use a::Thing;\n",
            "a.rs": "use crate::b::B;\nuse super::c::C;\npub struct Thing;\n",
            "b/mod.rs": "mod inner;\npub struct B;\n",
            "b/inner.rs": "use super::super::c::C;\nuse crate::Thing as _T;\n",
            "c.rs": "pub struct C;\nuse self::C as D;\n",
        },
        [],
        {("a", "b"): ["a.rs:1"], ("a", "c"): ["a.rs:2"], ("b", "c"): ["b/inner.rs:1"]},
    ),
]


def self_test():
    failures = 0
    for name, files, want_cycles, want_edges in SELF_TESTS:
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, *rel.split("/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            modules, edges = build_graph(root)
            got_cycles = sorted(cycles(modules, edges))
            problems = []
            if got_cycles != want_cycles:
                problems.append("cycles %s, expected %s" % (got_cycles, want_cycles))
            if edges != want_edges:
                problems.append("edges %s, expected %s" % (edges, want_edges))
            status = report(modules, edges, open(os.devnull, "w"))
            if status != (1 if want_cycles else 0):
                problems.append("exit status %d" % status)
        if problems:
            failures += 1
            print("self-test FAILED: %s: %s" % (name, "; ".join(problems)))
        else:
            verdict = "cycle %s" % got_cycles if got_cycles else "no cycle"
            print("self-test ok: %s (%s)" % (name, verdict))
    print(
        "module import check self-test: %d of %d passed"
        % (len(SELF_TESTS) - failures, len(SELF_TESTS))
    )
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(
        description="Check that the top-level modules of the Rust crate have no import cycle."
    )
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument(
        "--root",
        default=os.path.join(os.path.dirname(here), "src", "rust", "src"),
        help="the crate's source folder (default: src/rust/src of this repository)",
    )
    parser.add_argument("--dot", action="store_true", help="also print the graph in DOT format")
    parser.add_argument("--self-test", action="store_true", help="check the checker itself")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not os.path.isdir(args.root):
        print("module import check: no folder %s" % args.root, file=sys.stderr)
        return 2
    modules, edges = build_graph(args.root)
    if args.dot:
        print(dot(modules, edges))
        return report(modules, edges, sys.stderr)
    return report(modules, edges, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
