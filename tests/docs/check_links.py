#!/usr/bin/python3
"""Links and section references that stay true, checked on the source tree.

mkdocs 1.4 --strict fails on a link to a page that does not exist, not on one to a heading that does not. This
checks both, with the site's own Markdown (Python-Markdown with the toc extension, as mkdocs renders it):

1. Every link in README.md and in the pages under docs/ reaches a file, and its `#fragment` a heading (or an
   `{#id}`) of that page. README.md's links are relative to the repository, a page's to docs/.
2. Every `docs/<page>.md` or `docs/<page>.md#fragment` named anywhere else in the repository (code comments,
   messages, scripts, deploy/, the CHANGELOG) names a page and heading that exist.
3. No file points into README.md by section ("README, "Batched counting"", "see README.md, Stats"): the README
   is short now, and its sections moved to docs/. Name the page instead.
4. Every page under docs/ is in mkdocs.yml's nav (mkdocs 1.4 only mentions one that is not, and builds).

Usage: check_links.py REPO            (exit 1 with each offence as file:line: why)
       check_links.py --self-test     (samples that must pass and must fail)
"""

import pathlib
import re
import subprocess
import sys
import tempfile

import checker
import markdown

LINK = re.compile(r"\]\(([^()\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
DOCS_REF = re.compile(r"(?<![\w/.])docs/([\w./-]+\.md)(#[\w-]+)?")  # not tests/docs/..., not in a URL
URL = re.compile(r"https?://\S+")
# A README section named by its title or by a chapter: 'README "X"', 'README.md, "X"', 'README, Deploy',
# 'see README' or 'see README.md' (which section?), "the README's bound". README.md named as a file is fine,
# and so is upstream's README.
README_SECTION = re.compile(
    r"\bREADME(?:\.md)?(?:'s)?\s*,?\s*(?:\"[A-Z]|“|\((?:see|section)|(?:Deploy|Development|Stats|Settings)\b)"
    r"|\bsee (?:the )?README\b"
    r"|(?<!upstream's )(?<!deploy/)\bREADME\b(?!\.md)"
)


def heading_ids(path):
    """The ids mkdocs gives a page's headings (and its explicit {#id}s)."""
    md = markdown.Markdown(extensions=["toc", "attr_list", "tables", "pymdownx.superfences"])
    return set(re.findall(r'\bid="([^"]+)"', md.convert(path.read_text(encoding="utf-8"))))


def prose_lines(text):
    """(line number, line) outside fenced code, inline code blanked."""
    lines = text.split("\n")
    code = checker.code_lines(lines)
    for i, line in enumerate(lines):
        if i not in code:
            yield i + 1, INLINE_CODE.sub("``", line)


def check_page_links(page, base, offences, shown, heading_ids_of):
    for n, line in prose_lines(page.read_text(encoding="utf-8")):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, fragment = target.partition("#")
            dest = (base / file) if file else page
            if not dest.exists():
                offences.append(f"{shown}:{n}: link to {file}: no such file")
            elif fragment and dest.suffix == ".md" and fragment not in heading_ids_of(dest):
                offences.append(f"{shown}:{n}: link to {target}: {file or 'this page'} has no heading #{fragment}")


def tracked_files(repo):
    """The repository's files: git's list in a clone, else every file but build trees and npm packages."""
    r = subprocess.run(["git", "-C", str(repo), "ls-files", "-co", "--exclude-standard"], capture_output=True,
                       text=True)
    if r.returncode == 0:
        return [repo / f for f in r.stdout.split("\n") if f]
    return [f for f in repo.rglob("*") if not any(p.startswith("build") or p in ("node_modules", ".git")
                                                   for p in f.relative_to(repo).parts)]


def nav_pages(repo):
    """The pages mkdocs.yml's nav lists (its lines `- Title: path.md`)."""
    text = (repo / "mkdocs.yml").read_text(encoding="utf-8")
    return set(re.findall(r"^\s*-\s[^:\n]*:\s*(\S+\.md)\s*$", text, re.M))


def check(repo):
    offences = []
    docs = repo / "docs"
    ids = {}  # page -> its heading ids, read once per check
    def heading_ids_of(page):
        page = page.resolve()
        if page not in ids:
            ids[page] = heading_ids(page)
        return ids[page]
    if (repo / "mkdocs.yml").exists():
        listed = nav_pages(repo)
        for page in sorted(docs.rglob("*.md")):
            if str(page.relative_to(docs)) not in listed:
                offences.append(f"{page.relative_to(repo)}: not in mkdocs.yml's nav, so no reader finds it")
    check_page_links(repo / "README.md", repo, offences, "README.md", heading_ids_of)
    for page in sorted(docs.rglob("*.md")):
        # A page linked in from outside docs/ (BENCHMARKS.md) is read where the site puts it.
        check_page_links(page, page.parent, offences, str(page.relative_to(repo)), heading_ids_of)
    for f in tracked_files(repo):
        if not f.is_file() or f.is_symlink() or "node_modules" in f.parts or f.suffix in (".png", ".ico"):
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        shown = str(f.relative_to(repo))
        if shown == "tests/docs/check_links.py":  # its self-test's samples
            continue
        for n, line in enumerate(text.split("\n"), 1):
            for m in DOCS_REF.finditer(URL.sub("", line)):
                page = docs / m.group(1)
                if not page.exists():
                    offences.append(f"{shown}:{n}: docs/{m.group(1)}: no such page")
                elif m.group(2) and m.group(2)[1:] not in heading_ids_of(page):
                    offences.append(f"{shown}:{n}: docs/{m.group(1)} has no heading {m.group(2)}")
            if README_SECTION.search(line):
                offences.append(f"{shown}:{n}: names a README section: name its page under docs/ instead")
    return offences


def self_test():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = pathlib.Path(tmp)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "docs" / "guides").mkdir(parents=True)
        (repo / "docs" / "guides" / "a.md").write_text(
            "# A\n\n## Reset a `customer`\n\n## Custom {#here}\n\n[ok](../b.md#b-part) [ok](#here)\n"
            "```\n[not a link](nowhere.md)\n```\n")
        (repo / "docs" / "b.md").write_text("# B\n\n## B part\n\n[ok](guides/a.md#reset-a-customer)\n")
        (repo / "README.md").write_text("# R\n\n[ok](docs/b.md#b-part)\n")
        (repo / "code.cpp").write_text("// docs/guides/a.md#reset-a-customer says why; README.md is a file; so are\n"
                                       "// tests/docs/run.md and https://example.com/docs/gone.md#x\n")
        (repo / "mkdocs.yml").write_text("nav:\n  - B: b.md\n  - Guides:\n      - A: guides/a.md\n")
        if check(repo):
            failures.append(f"a clean tree has offences: {check(repo)}")
        bad = {
            "README.md": ("[x](docs/b.md#nope)\n", "has no heading #nope"),
            "docs/b.md": ("[x](c.md)\n", "link to c.md: no such file"),
            "docs/guides/a.md": ("[x](#reset-a-customerr)\n", "this page has no heading"),
            "code.cpp": ("// docs/guides/a.md#gone\n", "has no heading #gone"),
            "notes.txt": ('see README, "Batched counting"\n', "names a README section"),
            "x.sh": ("# see README.md, Stats\n", "names a README section"),
            "y.py": ("# README \"Per-tenant limits\"\n", "names a README section"),
            "docs/c.md": ("# C\n", "not in mkdocs.yml's nav"),
        }
        for name, (added, expect) in bad.items():
            f = repo / name
            before = f.read_text() if f.exists() else None
            f.write_text((before or "") + added)
            got = check(repo)
            if not any(expect in o for o in got):
                failures.append(f"{name} + {added.strip()!r}: expected '{expect}', got {got}")
            if before is None:
                f.unlink()
            else:
                f.write_text(before)
    return checker.self_test_result(failures, len(bad) + 1)


if __name__ == "__main__":
    sys.exit(checker.main("check_links", __doc__, check, self_test))
