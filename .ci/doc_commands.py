#!/usr/bin/env python3
"""Runs every `sh` block of the README and the book, so the guide cannot rot.

Each page's blocks run in order, in one scratch directory per page that
links the repository's `runs/`, `notebooks/`, `benches/` and `docs/`, as a
reader would run them from the repository root. `netsim` is the release
binary, with every simulation cut to `--end-us` (default 200) and `--quiet`
so the whole guide runs in minutes; `topo`, `partition`, `validate` and
`dpu-bench` run as written. `cargo run --release -p netsim -- ARGS` is
`netsim ARGS`; other cargo commands are CI's own steps and are skipped.
Python and Jupyter come from `--venv` (blocks that need them are skipped
without it); `pip install` lines are skipped. A command followed by the
comment `# exit N` must exit with code N. A block preceded by
`<!-- doc-test: skip (why) -->` is not run, nor are the performance
reports (full-size measurements).

    python3 .ci/doc_commands.py --netsim target/release/netsim --venv target/notebook-venv
"""

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"^<!--\s*doc-test:\s*skip\b")
EXPECT_EXIT = re.compile(r"^(?P<command>.*?)\s+#\s*exit (?P<code>\d+)\s*$")

PRELUDE = r"""
set -euo pipefail
netsim() {
  case "${1:-}" in
    topo|partition|validate|dpu-bench|help|-h|--help|-V|--version) "$DOC_NETSIM" "$@" ;;
    *) "$DOC_NETSIM" "$@" --end-us "$DOC_END_US" --quiet ;;
  esac
}
cargo() {
  local args=("$@")
  if [ "${1:-}" = run ] && [[ " $* " == *" -p netsim -- "* ]]; then
    while [ "${args[0]}" != "--" ]; do args=("${args[@]:1}"); done
    netsim "${args[@]:1}"
  else
    echo "doc-test: skipped (a CI step of its own): cargo $*"
  fi
}
doc_expect_exit() {
  local want=$1; shift
  local got=0
  "$DOC_NETSIM" "${@:2}" >doc-expect.out 2>&1 || got=$?
  if [ "$got" != "$want" ]; then
    echo "doc-test: '$*' exited $got, the guide says $want:" >&2; cat doc-expect.out >&2
    return 1
  fi
}
"""


def blocks(page):
    """The `sh` blocks of a page, each as its logical lines (continuations
    joined), with whether a skip marker precedes it."""
    lines = page.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            previous = next((l for l in reversed(lines[:i]) if l.strip()), "")
            body = []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            text = "\n".join(body).replace("\\\n", " ")
            found.append((bool(SKIP.match(previous.strip())), text.splitlines()))
        i += 1
    return found


def script(lines, venv):
    """A block's lines as bash, rewritten as the module docstring says, or
    None when the block needs Python and there is no venv."""
    out = []
    for line in lines:
        if "pip install" in line:
            out.append("echo 'doc-test: skipped: pip install (the venv is given)'")
            continue
        needs_python = ".venv/" in line or re.match(r"^\s*(NETSIM_RUN=\S+\s+)?python3?\b", line)
        if needs_python and venv is None:
            return None
        line = line.replace(".venv/", "$DOC_VENV/")
        line = re.sub(r"^(\s*(?:NETSIM_RUN=\S+\s+)?)python3?\b", r"\1$DOC_VENV/bin/python", line)
        expect = EXPECT_EXIT.match(line)
        if expect:
            line = f"doc_expect_exit {expect['code']} {expect['command'].strip()}"
        out.append(line)
    return "\n".join(out)


def pages(selected):
    if selected:
        return [Path(p).resolve() for p in selected]
    found = [ROOT / "README.md"]
    for page in sorted((ROOT / "docs").rglob("*.md")):
        # The reference has no commands; a performance report records how
        # its figures were measured, at full size, and is not re-run.
        if not {"reference", "perf"} & set(page.relative_to(ROOT / "docs").parts):
            found.append(page)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netsim", default=str(ROOT / "target/release/netsim"))
    parser.add_argument("--venv", help="a venv with notebooks/requirements.txt installed")
    parser.add_argument("--end-us", default="200", help="simulated time each run is cut to")
    parser.add_argument("pages", nargs="*", help="pages to run (default: README and docs/)")
    args = parser.parse_args()
    env = {
        "DOC_NETSIM": str(Path(args.netsim).resolve()),
        "DOC_VENV": str(Path(args.venv).resolve()) if args.venv else "",
        "DOC_END_US": args.end_us,
        "PATH": "/usr/bin:/bin",
    }
    ran = skipped = 0
    failures = []
    for page in pages(args.pages):
        name = page.relative_to(ROOT)
        with tempfile.TemporaryDirectory(prefix="netsim-doc-") as scratch:
            for link in ("runs", "notebooks", "benches", "docs"):
                (Path(scratch) / link).symlink_to(ROOT / link)
            for number, (skip, lines) in enumerate(blocks(page), 1):
                bash = None if skip else script(lines, args.venv)
                if bash is None:
                    skipped += 1
                    print(f"doc-test: {name} block {number}: skipped", flush=True)
                    continue
                started = time.monotonic()
                try:
                    result = subprocess.run(["bash", "-c", PRELUDE + bash], cwd=scratch,
                                            env=env, capture_output=True, text=True,
                                            timeout=900)
                except subprocess.TimeoutExpired as hung:
                    # A block that hangs fails like any other, with its output so far.
                    result = subprocess.CompletedProcess(
                        hung.cmd, 124, stdout=str(hung.stdout or ""),
                        stderr=str(hung.stderr or "") + "\ntimed out after 900 s")
                ran += 1
                seconds = time.monotonic() - started
                print(f"doc-test: {name} block {number}: exit {result.returncode} in {seconds:.1f} s",
                      flush=True)
                if result.returncode != 0:
                    failures.append(f"{name} block {number}")
                    print(bash, file=sys.stderr)
                    print(result.stdout[-3000:], result.stderr[-3000:], sep="\n", file=sys.stderr)
    print(f"doc-test: {ran} blocks ran, {skipped} skipped, {len(failures)} failed")
    if failures:
        print("doc-test: failed: " + ", ".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
