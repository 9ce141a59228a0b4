"""The ``--json`` documents of ``plan``, ``validate`` and ``run`` (:mod:`.machine`; docs/usage.md,
"Machine-readable output"): what their human output prints, as data, whatever the release kind.

Everything here is public: the configuration's terms, the kind's preview and guarantee (no data), and
of a run the table's location, version, row count (a synthetic release's: noised), the owners' record
counts and budgets and the guarantee recorded with the commit. MeanSSE (from the originals) is left out.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from rich.text import Text

from fragrelease.protocol.config import ReleaseConfig
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.kind import Block, release_kind

from .machine import blocks_data, preview_data


def kind_terms(cfg: ReleaseConfig) -> Mapping[str, Any]:
    """The configured terms that act on ``cfg``'s kind (IR: ``mechanism``, ``k``,
    ``epsilon_split``, the IR options; synthetic: ``synthesis_target``, ``synthesis_bins``,
    ``synthesis_collusion``, null for the default t), chosen by the kind
    (:meth:`fragrelease.protocol.kind.ReleaseKind.provenance_terms`), ``linkage`` included, and the terms the
    kind resolves from them as ``resolved_<name>`` (synthetic: ``resolved_owners``, ``resolved_collusion``, the
    t in force; :meth:`fragrelease.protocol.kind.ReleaseKind.resolved_terms`)."""
    every: dict[str, Any] = {"mechanism": cfg.mechanism, "k": cfg.k,
                             "epsilon_split": fragmentation_of(cfg.fragmentation).epsilon_split(cfg.epsilon_split),
                             **cfg.option_values()}
    kind = release_kind(cfg.linkage)
    terms = kind.provenance_terms(every, ())
    terms.pop("owners", None)  # the kind records its plan's owners: listed on their own here
    return {**terms, **{f"resolved_{k}": v for k, v in kind.resolved_terms(cfg).items()}}


def config_guarantee(cfg: ReleaseConfig, *, single_process: bool = False) -> Mapping[str, str]:
    """The guarantee a release of ``cfg`` would state (:meth:`fragrelease.protocol.kind.ReleaseKind.guarantee`),
    from its public terms; ``single_process``: one process plays every party (``fragrelease run``)."""
    return release_kind(cfg.linkage).guarantee(
        mechanism=cfg.mechanism, epsilon=str(cfg.epsilon), composition=fragmentation_of(cfg.fragmentation).composition,
        category_order=cfg.category_order, keep_id=cfg.keep_id, fragmentation=cfg.fragmentation,
        single_process=single_process, risk_check=cfg.risk_check is not None)


def _release(cfg: ReleaseConfig, config_path: str) -> Mapping[str, Any]:
    """What every document of a configuration says: the kind, the release and its owners."""
    return {"config": config_path, "kind": cfg.linkage, "name": cfg.name, "dataset": cfg.dataset,
            "fragmentation": cfg.fragmentation, "composition": fragmentation_of(cfg.fragmentation).composition,
            "epsilon": str(cfg.epsilon), "owners": [{"name": o.name, "rows": o.rows} for o in cfg.owners],
            "terms": kind_terms(cfg)}


def plan_document(cfg: ReleaseConfig, config_path: str, heading: str, pv: Any,
                  blocks: Sequence[Block]) -> Mapping[str, Any]:
    """``plan --json``: the release, the guarantee it would state, the heading line, the kind's preview as data
    (``preview``: IR, per attribute ε_attr, scale, errors and suggestions; synthetic, per measurement its ε,
    scale and cells, and the notes naming the collusion bound t) and the printed blocks (``blocks``)."""
    return {"command": "plan", **_release(cfg, config_path), "guarantee": config_guarantee(cfg),
            "heading": Text.from_markup(heading).plain, "preview": preview_data(pv), "blocks": blocks_data(blocks)}


def validate_document(cfg: ReleaseConfig, config_path: str, *, party: str, owner: Optional[str],
                      checks: Sequence[str]) -> Mapping[str, Any]:
    """``validate --json``: ``ok``, the checks that ran (:func:`fragrelease.jobs.cli._common._config`), the
    party checked for, the release and its output; ``data_checked`` is false (each owner checks its data)."""
    return {"command": "validate", **_release(cfg, config_path), "terms_text": release_kind(cfg.linkage).terms_text(cfg),
            "output": cfg.output_table or cfg.output, "party": party, "owner": owner, "checks": list(checks),
            "data_checked": False}


def run_document(cfg: ReleaseConfig, config_path: str, result: Any,
                 owner_reports: Sequence[tuple[str, str]]) -> Mapping[str, Any]:
    """``run --json``: the committed table (path, catalog name, version), its rows, ε, the owners (records,
    ε_j, attributes), the guarantee recorded with the commit, the kind's recorded terms
    (:func:`fragrelease.jobs.cli.history.version_terms`), the public report and each owner's private
    report path (its own file; not its content)."""
    from .history import version_terms

    prov = result.provenance
    return {"command": "run", **_release(cfg, config_path),
            "table": {"path": result.path, "name": result.table, "version": result.version},
            "rows": result.rows, "epsilon": str(result.epsilon), "composition": result.composition,
            "plan_id": prov.get("plan_id"), "release_terms": dict(version_terms(prov)),
            "owners": [{"name": o.name, "records": o.records, "epsilon": str(o.epsilon),
                        "attributes": list(o.attributes)} for o in result.owners],
            "guarantee": prov.get("guarantee"), "report": result.report,
            "owner_reports": [{"owner": name, "path": path} for name, path in owner_reports]}
