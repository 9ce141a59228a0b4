"""No tracked text file cites the steering documents or the seed papers by number (docs/specification.md §0).

A user's clone has neither the steering specification nor the seed files, so code, help texts,
provenance, configs, scripts and docs cite ``docs/specification.md §N`` and the papers by author and
venue (the convention of docs/specification.md §0). This test greps every tracked ``*.py``, ``*.md``,
``*.yaml``, ``*.yml``, ``*.sh``, ``*.ipynb`` and ``*.txt`` file and fails listing ``file:line`` of
each hit. Spark-free.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The forbidden names are assembled from pieces so that this file, which is tracked and grepped too,
# does not match itself.
_SPEC = "SP" + "EC"
_STYLE = "ST" + "YLE"
_PAPER = "pa" + "per"
#: Stems of the seed files of the steering documents.
_SEED_FILES = ("idp-ir-" + "fragmented-data", "cloning-" + "independent-publications",
               "privacy-" + "during-propagation", "two-party-" + "distdiffgen")

#: What counts as a citation of a steering document, a seed paper by number or a seed file.
PATTERNS = {
    f"{_SPEC}.md": re.compile(_SPEC + r"\.md"),
    f"{_SPEC} §": re.compile(r"\b" + _SPEC + r"\s*§"),
    # the bare word as a citation, e.g. "({_SPEC})" or "{_SPEC}'s reading"; the variable name SPECS is none
    f"the word {_SPEC}": re.compile(r"\b" + _SPEC + r"\b"),
    f"{_PAPER} 00N": re.compile(r"\b" + _PAPER + r"\s+00\d\b", re.IGNORECASE),
    f"{_STYLE}.md": re.compile(_STYLE + r"\.md"),
    "seed file": re.compile("seed" + "s/|" + r"\b(?:" + "|".join(map(re.escape, _SEED_FILES)) + r")\b"),
}

SUFFIXES = (".py", ".md", ".yaml", ".yml", ".sh", ".ipynb", ".txt")

#: Files allowed to cite the steering documents (none: the project cites docs/specification.md).
EXEMPT: set[str] = set()
ALLOWLIST: set[str] = set()


def tracked_text_files() -> list[str]:
    """Paths (relative to the repository root) of the tracked files with a suffix of :data:`SUFFIXES`."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:  # not a git checkout (e.g. an sdist)
        pytest.skip(f"git ls-files failed in {ROOT}: {exc}")
    return sorted(p for p in out.decode("utf-8").split("\0") if p.endswith(SUFFIXES))


def steering_refs(path: str, text: str) -> list[str]:
    """``path:line: [pattern] line text`` for every line of ``text`` that matches a pattern of :data:`PATTERNS`."""
    hits = []
    for no, line in enumerate(text.splitlines(), start=1):
        for name, rx in PATTERNS.items():
            if rx.search(line):
                hits.append(f"{path}:{no}: [{name}] {line.strip()[:160]}")
                break
    return hits


def test_patterns_catch_every_form_and_spare_non_citations():
    s, p = _SPEC, _PAPER
    for cited in (f"(see {s}.md §3)", f"(the {s} §5 step 3)", f"Δu = 1 for both ({s}).", f"{s}'s literal reading",
                  f"{p} 000 §5", f"{p.capitalize()} 001 §7 on Adult", f"habit 6 ({_STYLE}.md)", "``seed" "s/x.txt``",
                  f"(seed {p} ``{_SEED_FILES[2]}``)"):
        assert steering_refs("f", cited), cited
    for fine in ("SPECS = [AttributeSpec.from_attribute(a)]", "docs/specification.md §3", "a spectral method",
                 "Del Vasto-Terrientes et al. (ICISSP 2025) §5", "paper 2003", "seed=7"):
        assert not steering_refs("f", fine), fine


def test_no_tracked_file_cites_the_steering_documents():
    hits, seen = [], set()
    for path in tracked_text_files():
        if path in EXEMPT:
            continue
        seen.add(path)
        if path in ALLOWLIST:
            continue
        file = ROOT / path
        if not file.is_file():  # deleted in the working tree but still in the index
            continue
        hits += steering_refs(path, file.read_text(encoding="utf-8", errors="replace"))
    assert "fragrelease/budget.py" in seen, "git ls-files did not list the package: wrong root?"
    assert not hits, (f"{len(hits)} citation(s) of a steering document or seed paper; cite docs/specification.md §N "
                      "and the papers by author and venue instead:\n" + "\n".join(hits))
