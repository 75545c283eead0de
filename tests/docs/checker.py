"""What the docs checkers share: how a page's fenced code is told apart, which pages they read, their command
line and their self-test's report."""

import pathlib
import re
import sys

# A fence opens with ``` or ~~~ (indented in a list item, with an info string or not) and closes with the same
# characters alone on a line; an unclosed one runs to the page's end.
FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w-]*)")


def fenced_blocks(lines):
    """(index of the opening line, index of the closing line or len(lines), indent, info word) of each fenced
    block of `lines`."""
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(2)
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        yield i, j, m.group(1), m.group(3)
        i = j + 1


def code_lines(lines):
    """The indexes of `lines` inside fenced code, fences included."""
    inside = set()
    for start, end, _, _ in fenced_blocks(lines):
        inside.update(range(start, min(end, len(lines) - 1) + 1))
    return inside


def pages(repo):
    """README.md and the pages of docs/ that are the project's own (not the symlinked BENCHMARKS.md and such)."""
    return [repo / "README.md"] + sorted(p for p in (repo / "docs").rglob("*.md") if not p.is_symlink())


def self_test_result(failures, cases):
    """Prints the self-test's failures and its count; -> the exit status."""
    for f in failures:
        print("self-test:", f, file=sys.stderr)
    print(f"self-test: {cases - len(failures)} of {cases} cases as expected")
    return 1 if failures else 0


def main(name, doc, check, self_test):
    """`NAME REPO` prints check(REPO)'s offences; `NAME --self-test` runs self_test(). -> the exit status."""
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(doc, file=sys.stderr)
        return 2
    offences = check(pathlib.Path(sys.argv[1]).resolve())
    for o in offences:
        print(o, file=sys.stderr)
    print(f"{name}: {len(offences)} offence(s)")
    return 1 if offences else 0
