#!/usr/bin/env python3
"""Check that ARCHITECTURE.md still describes the code that is there.

It fails (exit 1, naming every problem) when

1. a relative Markdown link in ARCHITECTURE.md points to a file or folder
   that does not exist, or a link to a section of ARCHITECTURE.md itself
   ("#heading") names no heading of it;
2. a source file is not named in ARCHITECTURE.md. The source files are every
   *.R file under R/ and every *.rs file under src/rust/src/ (recursively;
   folders named vendor or target are skipped);
3. a path of an R or Rust source file written in backticks (a code span
   that contains a "/" and ends in .R or .rs, such as `R/foo.R` or
   `src/rust/src/nb/foo.rs`) names no file, read from the repository root:
   a stale path, or one written relative to another folder.

The one naming rule: a file is named when its path relative to the
repository root, with "/" separators, is the target of a relative link
(a "#fragment" and a leading "./" ignored) or the whole text of a code span.
So `[nb/fit.rs](src/rust/src/nb/fit.rs)` and `src/rust/src/nb/fit.rs` in
backticks name that file; `nb/fit.rs` alone in backticks does not, and nor
does a link to its folder. Links are Markdown's inline links
([text](target), [text](<target> "title")) and reference definitions
([label]: target); links and code spans inside fenced code blocks do not
count, and targets with a scheme (https:, mailto:) are not checked.

Python 3 standard library only. Usage:
  python3 tools/check-architecture.py             # check this repository
  python3 tools/check-architecture.py --root DIR  # check another checkout
  python3 tools/check-architecture.py --self-test # check the checker itself
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import urllib.parse

DOCUMENT = "ARCHITECTURE.md"
# Where the source files are, and which of them count.
SOURCE_TREES = [("R", ".R"), (os.path.join("src", "rust", "src"), ".rs")]
SKIPPED_FOLDERS = {"vendor", "target"}

# --- Reading the document -------------------------------------------------------

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A code span: a run of backticks, anything without that run, the same run.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
# An inline link's "](" ... ")" part; the text before it is not needed.
INLINE_TARGET = re.compile(r"\]\(\s*(<[^>\n]*>|[^\s)]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, line) of every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                continue
            yield number, line
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            fence = None


def code_spans(line):
    """(start, end, text) of the code spans of a line."""
    return [(m.start(), m.end(), m.group(2).strip()) for m in CODE_SPAN.finditer(line)]


def inside(position, spans):
    return any(start <= position < end for start, end, _ in spans)


def read_document(text):
    """(links, spans, headings): links as (line, target), spans as (line,
    text), headings as their text, in order."""
    links = []
    spans = []
    headings = []
    for number, line in prose_lines(text):
        line_spans = code_spans(line)
        spans.extend((number, span) for _, _, span in line_spans)
        heading = HEADING.match(line)
        if heading:
            headings.append(heading.group(2))
        definition = REFERENCE_DEFINITION.match(line)
        if definition and not inside(definition.start(1), line_spans):
            links.append((number, definition.group(1)))
            continue
        for match in INLINE_TARGET.finditer(line):
            # "](" inside a code span is code, not a link.
            if not inside(match.start(), line_spans):
                links.append((number, match.group(1)))
    return links, spans, headings


def heading_anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"`", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(headings):
    seen = {}
    result = set()
    for heading in headings:
        anchor = heading_anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.add(anchor if count == 0 else "%s-%d" % (anchor, count))
    return result


def relative_target(target):
    """The path a relative link names (fragment and "./" removed), "" for a
    link to a section of this document, or None for a link with a scheme."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("//"):
        return None
    path = urllib.parse.unquote(target.split("#", 1)[0].split("?", 1)[0])
    while path.startswith("./"):
        path = path[2:]
    return path


# --- The checks -----------------------------------------------------------------


def source_files(root):
    """Every source file that must be named, relative to root, "/"-separated."""
    files = []
    for tree, extension in SOURCE_TREES:
        top = os.path.join(root, tree)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_FOLDERS)
            for name in sorted(filenames):
                if name.endswith(extension):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    files.append(rel.replace(os.sep, "/"))
    return files


def check(root):
    """(problems, summary): a list of messages, and counts for the verdict."""
    document = os.path.join(root, DOCUMENT)
    if not os.path.isfile(document):
        return ["%s is missing" % DOCUMENT], {}
    with open(document, encoding="utf-8") as f:
        text = f.read()
    links, spans, headings = read_document(text)
    problems = []
    named = set()
    known_anchors = anchors(headings)
    checked_links = 0
    for line, target in links:
        path = relative_target(target)
        if path is None:
            continue
        checked_links += 1
        if path == "":
            fragment = target.split("#", 1)[1] if "#" in target else ""
            if fragment and urllib.parse.unquote(fragment).lower() not in known_anchors:
                problems.append(
                    "%s:%d: link to #%s: no heading of %s has that anchor"
                    % (DOCUMENT, line, fragment, DOCUMENT)
                )
            continue
        if path.startswith("/") or not os.path.exists(os.path.join(root, path)):
            problems.append(
                "%s:%d: broken link: %s does not exist" % (DOCUMENT, line, path)
            )
            continue
        named.add(path.rstrip("/"))
    for line, span in spans:
        named.add(span)
        if "/" in span and re.fullmatch(r"[\w./-]+\.(R|rs)", span):
            if not os.path.isfile(os.path.join(root, span)):
                problems.append(
                    "%s:%d: `%s` names a source file that does not exist"
                    % (DOCUMENT, line, span)
                )
    files = source_files(root)
    for path in files:
        if path not in named:
            problems.append(
                "%s is not named in %s (link to it, or write its path from the "
                "repository root in backticks, in the \"Where things live\" tables)"
                % (path, DOCUMENT)
            )
    return problems, {"files": len(files), "links": checked_links}


def report(root, out):
    problems, summary = check(root)
    if not problems:
        print(
            "architecture check: %d source files named, %d relative links resolve"
            % (summary["files"], summary["links"]),
            file=out,
        )
        return 0
    print("architecture check: %d problem(s) in %s:" % (len(problems), DOCUMENT), file=out)
    for problem in problems:
        print("  " + problem, file=out)
    return 1


# --- Self-test ------------------------------------------------------------------

GOOD_DOCUMENT = """# Doc

See [the fit](R/fit.R) and [a section](#where-things-live), [code](https://example.org).

```
[not a link](R/missing.R) and `R/also-missing.R` in a fence
```

`[not a link either](nowhere.md)` is code.

## Where things live

| file | what |
|---|---|
| [nb/a.rs](src/rust/src/nb/a.rs#L3) | linked, with a fragment |
| `src/rust/src/lib.rs` | in backticks |
| [`R/other.R`](./R/other.R "title") | a link whose text is code |
| [tools](tools/) | a folder |

[ref]: src/rust/src/nb/mod.rs
"""

GOOD_FILES = {
    "R/fit.R": "",
    "R/other.R": "",
    "src/rust/src/lib.rs": "",
    "src/rust/src/nb/a.rs": "",
    "src/rust/src/nb/mod.rs": "",
    "src/rust/vendor/crate/src/lib.rs": "",  # not a source file of the crate
    "src/rust/src/target/debug/build.rs": "",  # skipped folder
    "tools/x.py": "",
}

SELF_TESTS = [
    ("a document that names everything", {}, None, []),
    (
        "a broken link",
        {},
        lambda d: d + "\nAnd [gone](R/gone.R).\n",
        ["broken link: R/gone.R does not exist"],
    ),
    (
        "a broken link to a folder, and to a heading",
        {},
        lambda d: d + "\n[old](src/rust/src/old/) and [where](#where-things-lived).\n",
        ["broken link: src/rust/src/old/ does not exist", "link to #where-things-lived"],
    ),
    (
        "an R file that is not named",
        {"R/new.R": ""},
        None,
        ["R/new.R is not named"],
    ),
    (
        "a Rust file that is not named, deep in a module",
        {"src/rust/src/nb/deep/b.rs": ""},
        None,
        ["src/rust/src/nb/deep/b.rs is not named"],
    ),
    (
        "a path relative to src/rust/src does not name a file",
        {"src/rust/src/nb/c.rs": ""},
        lambda d: d + "\n`nb/c.rs` alone.\n",
        ["src/rust/src/nb/c.rs is not named", "`nb/c.rs` names a source file that does not exist"],
    ),
    (
        "a file named only inside a fenced code block is not named",
        {"R/fenced.R": ""},
        lambda d: d + "\n```\n`R/fenced.R`\n```\n",
        ["R/fenced.R is not named"],
    ),
    (
        "a stale source path in backticks",
        {},
        lambda d: d + "\nThe old `R/removed.R` and `src/rust/src/nb/removed.rs`.\n",
        [
            "`R/removed.R` names a source file that does not exist",
            "`src/rust/src/nb/removed.rs` names a source file that does not exist",
        ],
    ),
]


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def expect(name, problems, wanted):
    """A list of what is wrong with `problems` given the substrings wanted
    (each must appear; with none wanted, there must be no problem)."""
    wrong = []
    if not wanted and problems:
        wrong.append("unexpected problems %s" % problems)
    for substring in wanted:
        if not any(substring in p for p in problems):
            wrong.append("%r not reported (got %s)" % (substring, problems))
    if wanted and len(problems) != len(wanted):
        wrong.append("%d problems, expected %d: %s" % (len(problems), len(wanted), problems))
    return wrong


def copy_test(repo):
    """On a temporary copy of this repository's document and source trees: a
    new unnamed source file and a new broken link are both reported (whatever
    else the copy reports, since links to other folders do not resolve there)."""
    wrong = []
    with tempfile.TemporaryDirectory() as root:
        shutil.copy(os.path.join(repo, DOCUMENT), os.path.join(root, DOCUMENT))
        for tree, _ in SOURCE_TREES:
            shutil.copytree(
                os.path.join(repo, tree),
                os.path.join(root, tree),
                ignore=shutil.ignore_patterns(*SKIPPED_FOLDERS),
            )
        before, _ = check(root)
        write_tree(root, {"R/zz-self-test.R": "", "src/rust/src/zz_self_test.rs": ""})
        with open(os.path.join(root, DOCUMENT), "a", encoding="utf-8") as f:
            f.write("\n[self-test](R/zz-self-test-missing.R)\n")
        after, _ = check(root)
        new = [p for p in after if p not in before]
        wrong += expect(
            "copy",
            new,
            [
                "R/zz-self-test.R is not named",
                "src/rust/src/zz_self_test.rs is not named",
                "broken link: R/zz-self-test-missing.R does not exist",
            ],
        )
    return wrong


def self_test(repo):
    failures = 0
    total = 0
    for name, extra_files, edit, wanted in SELF_TESTS:
        total += 1
        with tempfile.TemporaryDirectory() as root:
            files = dict(GOOD_FILES)
            files.update(extra_files)
            files[DOCUMENT] = edit(GOOD_DOCUMENT) if edit else GOOD_DOCUMENT
            write_tree(root, files)
            problems, _ = check(root)
            wrong = expect(name, problems, wanted)
            status = report(root, open(os.devnull, "w"))
            if status != (1 if wanted else 0):
                wrong.append("exit status %d" % status)
        if wrong:
            failures += 1
            print("self-test FAILED: %s: %s" % (name, "; ".join(wrong)))
        else:
            print("self-test ok: %s" % name)
    if os.path.isfile(os.path.join(repo, DOCUMENT)):
        total += 1
        name = "a temporary copy of this repository: a new file and a broken link"
        wrong = copy_test(repo)
        if wrong:
            failures += 1
            print("self-test FAILED: %s: %s" % (name, "; ".join(wrong)))
        else:
            print("self-test ok: %s" % name)
    print("architecture check self-test: %d of %d passed" % (total - failures, total))
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(
        description="Check that ARCHITECTURE.md names every source file and has no broken link."
    )
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument(
        "--root",
        default=os.path.dirname(here),
        help="the repository's root (default: the parent of this script's folder)",
    )
    parser.add_argument("--self-test", action="store_true", help="check the checker itself")
    args = parser.parse_args()
    if not os.path.isdir(args.root):
        print("architecture check: no folder %s" % args.root, file=sys.stderr)
        return 2
    if args.self_test:
        return self_test(args.root)
    return report(args.root, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
