"""The README stays short and its links, and those of the pages it hands its detail to, resolve.

- README.md has at most :data:`MAX_README_LINES` lines, and its "## Quick start" holds CI's test
  command as its second fenced block (``.ci/run`` extracts it from there);
- every relative link (``[text](target)`` and images) in README.md and in :data:`PAGES` points to
  an existing file or folder, and a ``#anchor`` to a heading of the target (GitHub's slugs).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_README_LINES = 250
#: The docs pages that hold what the README handed over (issue 40), with the README itself.
PAGES = ("README.md", "docs/usage.md", "docs/configuration.md", "docs/protocol.md", "docs/deployment.md",
         "docs/systems.md", "docs/development.md")

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (links in code are not links)."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's ``-1``, ``-2`` suffixes for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file, folder or anchor does not exist, as written."""
    bad = []
    for line in _prose(page.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                bad.append(target)
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(target)
    return bad


def test_the_readme_has_at_most_250_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    assert (ROOT / page).is_file(), page
    assert broken_links(ROOT / page) == []


def test_the_link_check_sees_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "there.md").write_text("# A title\n\n## Two words: `x` y\n\n## Two words: `x` y\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok](there.md#two-words-x-y) [ok](there.md#two-words-x-y-1) [self](#top)\n"
                    "# Top\n![img](gone.png) [bad](there.md#nowhere) [web](https://example.org/x)\n"
                    "```\n[in code](missing.md)\n```\n", encoding="utf-8")
    assert broken_links(page) == ["gone.png", "there.md#nowhere"]


def test_ci_still_finds_the_test_command_in_the_quick_start():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    awk = script.split("cmd=$(awk '", 1)[1].split("' README.md)", 1)[0]
    out = subprocess.run(["awk", awk, str(ROOT / "README.md")], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("bash scripts/setup.sh && .venv/bin/ruff check . && .venv/bin/mypy -p fragrelease && "
                           ".venv/bin/python -m pytest -q -n 2 --dist loadscope --no-loadscope-reorder")
