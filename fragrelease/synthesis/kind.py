"""The synthetic release kind's Spark-free half (``linkage: synthetic``; docs/specification.md §10): its
configuration checks, guarantee, provenance terms, checks before Spark and what the command line shows
of it. Registered in :data:`fragrelease.kinds.KINDS`; the protocol reaches it through
:func:`fragrelease.protocol.kind.release_kind` only.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.protocol.categories import check_category_counts
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.kind import Block, KindConfig, Line, ReleaseFigures, ReleaseKind, TextTable, warning_line
from fragrelease.protocol.membership import HORIZONTAL_MEMBERSHIP

#: The plan's terms that do not act on a synthetic release: not recorded in its provenance as if they did.
IR_TERMS = ("mechanism", "k", "epsilon_split", "category_order", "category_order_share", "postprocess")
#: The configuration keys of microaggregation a synthetic release refuses when given (they would do nothing).
IR_KEYS = ("mechanism", "k", "category_order", "category_order_share", "postprocess")
_IR_ONLY = ("a term of microaggregation; a synthetic release draws its rows from a model fitted to the owners' noisy "
            "marginals, docs/specification.md §10")
#: The guarantee's ``table`` sentence of a synthetic release.
TABLE_TEXT = (
    "whole table ε-DP, ε = {epsilon}: the rows are drawn from a graphical model fitted to the sums of the "
    "owners' marginals; every sum is decoded only over all owners (secure aggregation) and carries discrete-"
    "Laplace noise made of the owners' shares, the 1-way, pair and clique measurements compose sequentially to "
    "ε, the owners' records are disjoint (parallel composition), and the structure, the model, the row count "
    "and the rows are post-processing. Rows are not records: no row stands for a person")


def synthetic_guarantee(*, epsilon: str, single_process: bool = False) -> dict[str, str]:
    """The guarantee of a ``linkage: synthetic`` release (docs/specification.md §10, "Guarantee").

    Same keys as :func:`fragrelease.idpir.guarantee.release_guarantee`. Every decoded sum is the owners'
    exact sum plus their noise shares, of which any m − t owners' add up to a discrete Laplace calibrated to
    its measurement's share of ε (sensitivity 2 under substitution); the measurements compose sequentially,
    horizontal owners hold disjoint records (parallel composition); the structure, the model, the row
    count and the rows are post-processing. The mechanism is (ε, 0)-DP against the recipients, the
    aggregator and any t owners together (t: the table's ``synthesis.collusion``); no local sensitivity
    enters, so the statement is DP, not iDP.
    """
    holder = ("In this release one process played every party and generated the pseudonym key of the metadata "
              "round's id digests" if single_process else
              "The aggregator does not hold the pseudonym key unless an owner gives it")
    return {
        "neighbouring": "substitution of one record; the number of records of each owner is public",
        "notion": ("differential privacy (marginal synthesis: discrete-Laplace noise on counts, added once for the "
                   "sum as shares of the owners and sampled exactly from the OS CSPRNG, calibrated to sensitivity 2 "
                   "under substitution; no local sensitivity)"),
        "per_column": f"every column is a function of the whole table, which is {epsilon}-DP (below)",
        "table": TABLE_TEXT.format(epsilon=epsilon),
        "against": (f"release recipients: the statements above, for the records' values; each owner's exact record "
                    "count is public (provenance). The aggregator and any t owners together (t: the collusion bound, "
                    "synthesis.collusion in the table's properties): each owner's measurements reach them only masked "
                    "(one owner's message is uniformly distributed to anyone who lacks a key it shares with another "
                    "owner) and as sums over all owners, whose noise without the coalition's own shares is still a "
                    f"whole discrete Laplace: {epsilon}-DP for the records' values of the owners outside the coalition, "
                    "as the release is; each owner's exact record count is public; a coalition of more than t owners "
                    "with the aggregator is not covered. A horizontal owner's metadata round also "
                    "writes keyed digests of its record ids for the disjointness check, so every holder of the "
                    f"pseudonym key learns each owner's set of record ids (not their values). {holder}. Someone with "
                    "write access to work_dir can delete or replace messages: every message is signed and verified "
                    "under its owner's configured key, masks that do not cancel are refused before anything is "
                    "decoded, and an owner with a ledger records each round's ε once, so it refuses to measure a "
                    f"round twice. {HORIZONTAL_MEMBERSHIP}"),
    }


def synthesis_spec_of(cfg: KindConfig, attributes: Sequence[Any]):
    """The synthesis spec of ``cfg`` from its schema's released ``attributes`` (no data):
    :func:`fragrelease.synthesis.protocol.synthesis_spec`.

    Raises
    ------
    ConfigError
        ``synthesis_target`` is not a released attribute, fewer than two attributes are released, or
        ``synthesis_collusion`` is not below the number of owners.
    """
    from fragrelease.synthesis.protocol import synthesis_spec

    try:
        return synthesis_spec(attributes, cfg.epsilon, target=cfg.synthesis_target, bins=cfg.synthesis_bins,
                              owners=len(cfg.owners), collusion=cfg.synthesis_collusion)
    except InvalidParameterError as exc:
        raise ConfigError(str(exc)) from None


def _collusion(cfg: KindConfig) -> int:
    """t of ``cfg``: its ``synthesis_collusion``, or the default for its number of owners (public)."""
    from fragrelease.synthesis.mechanism import default_collusion_bound

    return cfg.synthesis_collusion if cfg.synthesis_collusion is not None else default_collusion_bound(len(cfg.owners))


class SyntheticKind(ReleaseKind):
    """A marginal-synthesis release (docs/specification.md §10): the owners release noisy marginals, the
    aggregator draws rows from a model of them. Its rows are not records; it offers no owner preview
    (its noise depends on public terms only)."""

    name = "synthetic"
    unused_keys = {key: _IR_ONLY for key in IR_KEYS}

    def config_problems(self, cfg: KindConfig) -> list[str]:
        """Vertical fragments are refused: the joint counts the synthesis measures span attributes that
        different vertical owners hold, and no protocol with a stated guarantee against each party computes
        them. ``keep_id`` and ``risk_check`` are refused (the rows are not records: no id, no owner's row
        to check)."""
        problems = []
        if fragmentation_of(cfg.fragmentation).composition != "parallel":  # the marginals need disjoint records
            problems.append("linkage: synthetic is for horizontal fragments only: the marginals it measures join "
                            "attributes that different vertical owners hold, and no protocol computes them with a "
                            "guarantee against each owner (docs/specification.md §10)")
        if cfg.keep_id:
            problems.append("keep_id: true cannot be used with linkage: synthetic (the rows are drawn from a model, "
                            "not records)")
        if cfg.risk_check is not None:
            problems.append("risk_check: not available with linkage: synthetic (the rows are drawn from a model; the "
                            "owners release no row of their own to check)")
        return problems

    def guarantee(self, *, mechanism: str, epsilon: str, composition: str, category_order: str,
                  keep_id: bool = False, fragmentation: str = "horizontal", single_process: bool = False,
                  risk_check: bool = False) -> dict[str, str]:
        return synthetic_guarantee(epsilon=epsilon, single_process=single_process)

    def provenance_terms(self, prov: Mapping[str, Any], owners: Sequence[Any]) -> dict[str, Any]:
        # the IR terms do not act on a synthetic release: not recorded as if they did
        out = {key: value for key, value in prov.items() if key not in IR_TERMS}
        out["owners"] = [{"name": o.name, "n_records": o.n_records, "epsilon": str(o.epsilon),
                          "attributes": list(o.attributes)} for o in owners]
        return out

    def check_party(self, cfg: KindConfig, party: str) -> None:
        if party in ("run", "aggregator"):
            from fragrelease.synthesis.model import require_mbi

            require_mbi()  # the aggregator fits the model with mbi: refused before Spark and before any owner spends

    def check_schema(self, cfg: KindConfig, attributes: Sequence[Any]) -> None:
        check_category_counts(attributes, dataset=cfg.dataset)  # 200,000 categories: refused here, not after hours
        synthesis_spec_of(cfg, attributes)  # the target and the domain, before Spark starts

    def preview(self, cfg: KindConfig, attributes: Sequence[Any], *, rows: Optional[int], builtin_rows: Optional[int],
                threshold: float, suggestions: bool = True) -> Any:
        """The synthesis preview (:func:`fragrelease.synthesis.preview.synthesis_preview`): the ε split and
        each measurement's noise. Records: the built-in table's size, else the owners' declared rows (``rows``
        for those that declare none; unknown when neither). ``threshold`` and ``suggestions`` do not apply."""
        from fragrelease.synthesis.preview import synthesis_preview

        records: Optional[int]
        if builtin_rows is not None:
            records = builtin_rows
        elif all(o.rows is not None for o in cfg.owners):
            records = sum(o.rows or 0 for o in cfg.owners)
        else:
            records = None if rows is None else sum(o.rows if o.rows is not None else rows for o in cfg.owners)
        return synthesis_preview(synthesis_spec_of(cfg, attributes), len(cfg.owners), records)

    def preview_blocks(self, pv: Any, *, suggestions: bool = True) -> list[Block]:
        out: list[Block] = [TextTable(tuple(pv.header()), tuple(tuple(r) for r in pv.table_rows()),
                                      left=("measurement",))]
        warning = pv.warning_text()
        if warning:
            out.append(warning_line(warning))
        return out + [Line(f"  note: {note}") for note in pv.notes]

    def plan_heading(self, cfg: KindConfig, config_path: str) -> str:
        return (f"{config_path}: synthetic release of {cfg.dataset} (whole table ε-DP), {len(cfg.owners)} horizontal "
                f"owners, ε {cfg.epsilon}, target {cfg.synthesis_target or 'none'}, collusion bound t = "
                f"{_collusion(cfg)}")

    def terms_text(self, cfg: KindConfig) -> str:
        return f"synthetic (target {cfg.synthesis_target or 'none'})"

    def resolved_terms(self, cfg: KindConfig) -> dict[str, Any]:
        """The owners m and the collusion bound t in force (the default ⌊m/3⌋ when none is configured)."""
        return {"owners": len(cfg.owners), "collusion": _collusion(cfg)}

    def summary_blocks(self, cfg: KindConfig, result: ReleaseFigures, *,
                       owner_reports: Sequence[tuple[str, str]] = ()) -> list[Block]:
        """Public terms and noised values only (the owners write no private report of released rows)."""
        prov = result.provenance
        terms = prov["synthesis"]
        guarantee = prov["guarantee"]
        owners = ", ".join(f"{o.name} {o.records:,} records" for o in result.owners)
        return [
            Line(f"{cfg.name}: synthetic release of {prov['dataset']} from {len(result.owners)} horizontal owners "
                 f"({owners}), each spending ε_j = {result.epsilon}", soft_wrap=True),
            Line(f"rows {result.rows:,} (drawn from the model; the count is noised) | ε {result.epsilon}: 1-ways "
                 f"{terms['epsilon_one_way']}, pairs {terms['epsilon_selection']}, cliques {terms['epsilon_cliques']} | "
                 f"target {terms['target'] or 'none'} | numeric bins {terms['bins']}", soft_wrap=True),
            Line(f"noise once for the sum (secure aggregation): {terms['owners']} owners, collusion bound t = "
                 f"{terms['collusion']}", soft_wrap=True),
            Line("cliques: " + ", ".join("×".join(c) for c in terms["cliques"]), soft_wrap=True),
            Line(f"guarantee: {guarantee['table']}.", soft_wrap=True),
            Line(f"  against whom: {guarantee['against']}.", soft_wrap=True),
            Line("owners' private reports: none (the released rows are drawn from the model, none is an owner's "
                 "record to compare with its original; the public report describes the table)", soft_wrap=True),
        ]

    def owner_preview_refusal(self) -> str:
        return ("owner preview simulates microaggregation noise on the owner's data; a synthetic release's noise "
                "depends on public terms only")


#: ``linkage: synthetic``.
SYNTHETIC = SyntheticKind()
