#!/usr/bin/env python3
"""Checks the documentation's links and lengths (CI runs it; no dependencies).

Every relative link and image in README.md, CONTRIBUTING.md and docs/**.md
must name a file that exists, and its #anchor a heading of that file (as
mdBook and GitHub spell heading ids). A page of the book (docs/) may only
link inside docs/, or the built book would carry a dead link. Every page
under docs/ must be listed in docs/SUMMARY.md. The lengths issue 37 set
hold: README and getting started <= 200 lines, each guide page <= 250,
DESIGN.md <= 400. With --book DIR, every relative link of the built book
(mdbook build docs) must name a file the build wrote.

    python3 .ci/check_docs.py [--book target/book]   # exits 1 on a problem
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# Longest allowed pages, in lines (issue 37).
MAX_LINES = {
    "README.md": 200,
    "docs/getting-started.md": 200,
    "docs/DESIGN.md": 400,
}
MAX_GUIDE_PAGE_LINES = 250

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """The lines of a markdown file outside fenced code blocks."""
    inside = False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield line


def anchor_of(heading):
    """A heading's id as mdBook and GitHub make it: lower case, inline code
    and emphasis marks dropped, spaces to dashes, punctuation removed."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.lower().replace(" ", "-")
    return "".join(c for c in text if c.isalnum() or c in "-_")


def anchors(path):
    found = set()
    for line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if match:
            found.add(anchor_of(match.group(2)))
    return found


def pages():
    yield ROOT / "README.md"
    if (ROOT / "CONTRIBUTING.md").exists():
        yield ROOT / "CONTRIBUTING.md"
    yield from sorted(DOCS.rglob("*.md"))


def check_links(problems):
    cache = {}
    for page in pages():
        for number, line in enumerate(prose_lines(page.read_text()), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http(s), mailto: not checked offline
                path, _, anchor = target.partition("#")
                resolved = (page.parent / path).resolve() if path else page
                where = f"{page.relative_to(ROOT)}: link {target}"
                if not resolved.exists():
                    problems.append(f"{where}: no such file")
                    continue
                if page.is_relative_to(DOCS) and not resolved.is_relative_to(DOCS):
                    problems.append(f"{where}: leaves docs/, so the book would carry a dead link")
                if anchor and resolved.suffix == ".md":
                    if resolved not in cache:
                        cache[resolved] = anchors(resolved)
                    if anchor not in cache[resolved]:
                        problems.append(f"{where}: no heading #{anchor} in {resolved.relative_to(ROOT)}")


def check_summary(problems):
    summary = (DOCS / "SUMMARY.md").read_text()
    listed = {(DOCS / target).resolve() for target in LINK.findall(summary)}
    for page in sorted(DOCS.rglob("*.md")):
        if page.name == "SUMMARY.md":
            continue
        if page.resolve() not in listed:
            problems.append(f"{page.relative_to(ROOT)}: not listed in docs/SUMMARY.md")


def check_lengths(problems):
    limits = dict(MAX_LINES)
    for page in sorted((DOCS / "guide").glob("*.md")):
        if page.name != "output.md":  # the schema tables: reference, not guide prose
            limits[str(page.relative_to(ROOT))] = MAX_GUIDE_PAGE_LINES
    for name, limit in limits.items():
        lines = len((ROOT / name).read_text().splitlines())
        if lines > limit:
            problems.append(f"{name}: {lines} lines, more than {limit}")


def check_book(book, problems):
    """Relative links of the HTML mdBook wrote must resolve (mdBook rewrites
    `.md` links to `.html`, and a page it renames breaks them)."""
    href = re.compile(r'(?:href|src)="([^"#?]+)[^"]*"')
    for page in sorted(book.rglob("*.html")):
        for target in href.findall(page.read_text(errors="replace")):
            if re.match(r"^[a-z]+:|^//", target):
                continue
            if not (page.parent / target).resolve().exists():
                problems.append(f"book {page.relative_to(book)}: link {target}: no such file")


def main():
    problems = []
    check_links(problems)
    check_summary(problems)
    check_lengths(problems)
    if len(sys.argv) == 3 and sys.argv[1] == "--book":
        check_book(Path(sys.argv[2]).resolve(), problems)
    for problem in problems:
        print(f"check_docs: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check_docs: links, SUMMARY and lengths of {len(list(pages()))} pages are fine")


if __name__ == "__main__":
    main()
