"""The release kinds' Spark-free half (fragrelease/protocol/kind.py): every registered kind implements
ReleaseKind, states its terms, and the protocol's shared modules ask it instead of branching on its name.

docs/architecture.md, "Release kinds". No Spark: every test here reads configurations and source files only.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.kinds import KINDS
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.kind import Line, ReleaseKind, TextTable, release_kind

ROOT = Path(__file__).resolve().parents[2]
#: The kinds' own folders (and their modules) the shared modules must not import.
KIND_MODULES = ("fragrelease.idpir", "fragrelease.synthesis", "fragrelease.jobs.idpir", "fragrelease.jobs.synthesis",
                "jobs.idpir", "jobs.synthesis")
#: Shared modules that import no kind and compare no linkage with a kind's name. Left for later (they
#: still import IR math: the plan's per-owner budgets and specs, the IR options' defaults, a single owner's
#: protect()): fragrelease/protocol/{config,messages,options,plan_check}.py, jobs/api.py; the IR experiment
#: commands (jobs/cli/experiments.py) import the IR math by design.
SHARED = ["fragrelease/protocol/kind.py", "fragrelease/protocol/fragmentation.py", "fragrelease/protocol/membership.py",
          "fragrelease/protocol/difference.py", "jobs/protocol/preflight.py", "jobs/protocol/placement.py",
          "jobs/release_api.py", "jobs/cli/__init__.py", "jobs/cli/_common.py", "jobs/cli/release.py",
          "jobs/cli/parties.py", "jobs/cli/printing.py", "jobs/cli/history.py"]
#: Shared modules that import IR math (above) but must not branch on a kind's name.
NO_BRANCH = SHARED + ["fragrelease/protocol/config.py", "fragrelease/protocol/messages.py",
                      "fragrelease/protocol/options.py", "jobs/api.py"]


def _cfg(**kw):
    data = dict(name="s", dataset="adult-income", fragmentation="horizontal", epsilon="1", k=50,
                owners=[{"name": "a", "rows": 22611}, {"name": "b", "rows": 22611}],
                work_dir="/tmp/fr-test-kinds/work", output="/tmp/fr-test-kinds/out")
    data.update(kw)
    if data.get("linkage") == "synthetic":
        data.pop("k")  # not used by a synthetic release: refused when given
    return config_from_dict(data)


def test_every_registered_kind_is_a_release_kind_under_its_wire_name():
    assert list(KINDS)[:3] == ["linked", "unlinked", "synthetic"]
    for name in KINDS:
        kind = release_kind(name)
        assert isinstance(kind, ReleaseKind) and kind.name == name
        assert not getattr(type(kind), "__abstractmethods__", None)
    today = ("linked", "unlinked", "synthetic")
    assert [release_kind(n).single_owner for n in today] == [True, False, False]
    assert [release_kind(n).owner_preview is not None for n in today] == [True, True, False]
    with pytest.raises(InvalidParameterError, match="^" + re.escape(f"linkage must be one of {list(KINDS)}, not 'joined'") + "$"):
        release_kind("joined")


def test_each_kind_refuses_its_own_configuration_problems():
    with pytest.raises(ConfigError, match=r"keep_id: true cannot be used with linkage: unlinked \(the id would link"):
        _cfg(linkage="unlinked", keep_id=True)
    assert _cfg(linkage="linked", keep_id=True).keep_id
    assert release_kind("linked").config_problems(_cfg(linkage="linked")) == []
    synthetic = SimpleNamespace(fragmentation="horizontal", keep_id=True, risk_check=None, linkage="synthetic")
    assert release_kind("synthetic").config_problems(synthetic) == [  # type: ignore[arg-type]
        "keep_id: true cannot be used with linkage: synthetic (the rows are drawn from a model, not records)"]
    with pytest.raises(InvalidParameterError, match="keep_id cannot be used with linkage 'unlinked'"):
        release_kind("unlinked").check_plan_options(keep_id=True)
    release_kind("linked").check_plan_options(keep_id=True)
    release_kind("synthetic").check_plan_options(keep_id=False)


def test_the_provenance_keeps_only_the_terms_that_act_on_the_kind():
    prov = {"mechanism": "idp-ir", "k": 5, "epsilon_split": "none", "category_order": "declared",
            "category_order_share": "1/10", "postprocess": "isotonic", "synthesis_target": None, "synthesis_bins": 10,
            "owners": [{"name": "a", "budgets": []}], "epsilon": "1"}
    owner = SimpleNamespace(name="a", n_records=3, epsilon=1, attributes=("x",))
    assert release_kind("linked").provenance_terms(prov, [owner]) == {
        k: v for k, v in prov.items() if k not in ("synthesis_target", "synthesis_bins")}
    assert release_kind("synthetic").provenance_terms(prov, [owner]) == {
        "synthesis_target": None, "synthesis_bins": 10, "epsilon": "1",
        "owners": [{"name": "a", "n_records": 3, "epsilon": "1", "attributes": ["x"]}]}


def test_the_command_lines_texts_come_from_the_kind():
    ir, synthetic = _cfg(), _cfg(linkage="synthetic", synthesis_target="income")
    assert release_kind("linked").terms_text(ir) == "k 50, idp-ir"
    assert release_kind("synthetic").terms_text(synthetic) == "synthetic (target income)"
    assert release_kind("synthetic").plan_heading(synthetic, "c.yaml") == (
        "c.yaml: synthetic release of adult-income (whole table ε-DP), 2 horizontal owners, ε 1, target income, "
        "collusion bound t = 1")
    assert release_kind("linked").plan_heading(ir, "c.yaml") == (
        "c.yaml: horizontal release of adult-income, 2 owners, ε 1, k 50, idp-ir, category order dp-frequency")
    result = SimpleNamespace(provenance={"dataset": "adult-income", "guarantee": {"table": "T", "against": "A"},
                                         "synthesis": {"epsilon_one_way": "1/5", "epsilon_selection": "1/20",
                                                       "epsilon_cliques": "3/4", "target": "income", "bins": 10,
                                                       "owners": 1, "collusion": 0, "cliques": [["age", "income"]]}},
                             owners=[SimpleNamespace(name="a", records=1000)], rows=990, epsilon=1)
    blocks = release_kind("synthetic").summary_blocks(synthetic, result)  # type: ignore[arg-type]
    assert [b.text for b in blocks if isinstance(b, Line)][2:] == [
        "noise once for the sum (secure aggregation): 1 owners, collusion bound t = 0", "cliques: age×income",
        "guarantee: T.", "  against whom: A.",
        "owners' private reports: none (the released rows are drawn from the model, none is an owner's record to "
        "compare with its original; the public report describes the table)"]
    assert "depends on public terms only" in release_kind("synthetic").owner_preview_refusal()


def test_the_ir_preview_is_printed_as_the_kinds_blocks():
    from fragrelease.schemas.datasets import resolve_schema

    cfg = _cfg(dataset="wine", owners=[{"name": "a", "rows": 3000}, {"name": "b", "rows": 3497}])
    kind = release_kind("linked")
    pv = kind.preview(cfg, resolve_schema("wine").protected, rows=None, builtin_rows=None, threshold=0.5,
                      suggestions=False)
    blocks = kind.preview_blocks(pv, suggestions=False)
    table = next(b for b in blocks if isinstance(b, TextTable))
    assert table.header[0] == "attribute" and {"attribute", "kind", "check"} <= set(table.left)
    assert len(table.rows) == len(resolve_schema("wine").protected)
    assert "ε_attr" not in table.left  # figures are right-aligned


def _package(rel: str) -> list[str]:
    """The installed package of the module at ``rel`` (``jobs/cli/x.py`` -> fragrelease.jobs.cli)."""
    parts = list(Path(rel).parent.parts)
    return (["fragrelease"] if parts[0] == "fragrelease" else ["fragrelease", parts[0]]) + parts[1:]


def _imports_and_names(source: str, rel: str) -> tuple[list[str], list[str]]:
    """Every import of ``source`` (absolute names, relative ones resolved, inside functions too) and every
    comparison with a kind's wire name or use of ``linkage_of`` (``rel:line``)."""
    imports, compared = [], []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imports += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = _package(rel)
                base = ".".join(pkg[:len(pkg) - (node.level - 1)] + ([base] if base else []))
            imports += [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in KINDS:
                    compared.append(f"{rel}:{node.lineno}")
        elif isinstance(node, ast.Name) and node.id == "linkage_of":
            compared.append(f"{rel}:{node.lineno} linkage_of")
    return imports, compared


def test_the_shared_modules_import_no_kind_and_never_branch_on_its_name():
    bad = []
    for rel in NO_BRANCH:
        imports, compared = _imports_and_names((ROOT / rel).read_text(encoding="utf-8"), rel)
        bad += compared
        if rel in SHARED:
            bad += [f"{rel} imports {m}" for m in imports
                    if any(m == k or m.startswith(k + ".") for k in KIND_MODULES)]
    assert not bad, "\n".join(bad)


def test_the_rule_catches_a_planted_import_and_comparison():
    planted = ("from ..idpir.owner_preview import owner_preview\n"
               "def f(cfg):\n    from fragrelease.synthesis.kind import SYNTHETIC\n"
               "    return cfg.linkage == \"synthetic\"\n")
    imports, compared = _imports_and_names(planted, "jobs/cli/planted.py")
    assert imports == ["fragrelease.jobs.idpir.owner_preview.owner_preview", "fragrelease.synthesis.kind.SYNTHETIC"]
    assert compared == ["jobs/cli/planted.py:4"]
