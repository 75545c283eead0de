#!/usr/bin/python3
"""The house rules for the documentation's prose that a program can check (README.md and docs/):

1. No parentheses inside parentheses. A paragraph's text, outside code and link targets, never opens a second
   "(" before the first one is closed: say the inner thing in a sentence of its own.
2. No sentence of more than 40 words outside tables and lists' code: one idea per sentence.

docs/reference/settings.md (generated) and docs/architecture.md (the contributors' map) are left out of rule 2.

Usage: check_prose.py REPO            (exit 1 with each offence as file:line: why)
       check_prose.py --self-test     (samples that must pass and must fail)
"""

import re
import sys

import checker

LONGEST_SENTENCE = 40


def paragraphs(text):
    """(first line number, text) of each paragraph or list item outside fenced code and tables."""
    lines = text.split("\n") + [""]
    code = checker.code_lines(lines)
    para, start = [], 0
    for n, line in enumerate(lines, 1):
        if n - 1 in code or line.startswith("|") or line.startswith("<!--"):
            line = ""
        starts_item = re.match(r"^\s*(?:[-*]|\d+\.)\s", line)
        if (not line.strip() or starts_item or line.startswith("#")) and para:
            yield start, " ".join(para)
            para = []
        if line.strip() and not line.startswith("#"):
            if not para:
                start = n
            para.append(line.strip())
        elif line.startswith("#"):
            yield n, line.lstrip("#")


def plain(text):
    text = re.sub(r"`[^`]*`", "C", text)  # code spans
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    return re.sub(r"https?://\S+", "U", text)


def check_page(text, shown, long_sentences=True):
    offences = []
    for line, para in paragraphs(text):
        p = plain(para)
        depth = 0
        for c in p:
            if c == "(":
                depth += 1
                if depth == 2:
                    offences.append(f"{shown}:{line}: parentheses inside parentheses")
                    break
            elif c == ")":
                depth = max(0, depth - 1)
        if long_sentences:
            for sentence in re.split(r"(?<=[.!?:;])\s+(?=[A-Z`*\[])", p):
                words = len(sentence.split())
                if words > LONGEST_SENTENCE:
                    offences.append(f"{shown}:{line}: a sentence of {words} words: "
                                    f"'{' '.join(sentence.split()[:8])} …'")
    return offences


def check(repo):
    offences = []
    for page in checker.pages(repo):
        shown = str(page.relative_to(repo))
        if shown == "docs/reference/settings.md":
            continue
        offences += check_page(page.read_text(encoding="utf-8"), shown, shown != "docs/architecture.md")
    return offences


def self_test():
    good = ("# T\n\nOne idea (with a [link](a.md#b-(c))). Another: `f(g(x))`.\n\n- an item (one)\n"
            "```\n(code (inside))\n```\n| a (b (c)) |\n")
    bad = {
        "nested parentheses": "Text (outer (inner)) here.\n",
        "nested across lines": "Text (outer\nand (inner) more) here.\n",
        "a long sentence": " ".join(["word"] * (LONGEST_SENTENCE + 1)) + ".\n",
    }
    failures = []
    if check_page(good, "good"):
        failures.append(f"a good page has offences: {check_page(good, 'good')}")
    for name, text in bad.items():
        if not check_page(text, name):
            failures.append(f"{name}: not caught")
    return checker.self_test_result(failures, len(bad) + 1)


if __name__ == "__main__":
    sys.exit(checker.main("check_prose", __doc__, check, self_test))
