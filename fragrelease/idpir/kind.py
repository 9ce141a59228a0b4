"""The IR release kinds' Spark-free half (``linkage: linked`` and ``unlinked``; docs/specification.md §1-§3):
their configuration checks, guarantee, provenance terms, checks before Spark and what the command line
shows of them, each delegating to the IR functions that compute it. Registered in
:data:`fragrelease.kinds.KINDS`; the protocol reaches them through
:func:`fragrelease.protocol.kind.release_kind` only.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.idpir.guarantee import release_guarantee
from fragrelease.idpir.linkage import LINKED_ROWS, UNLINKED_ROWS, IRLinkage
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.spec import required_k
from fragrelease.idpir.stage import resolve_k
from fragrelease.protocol.categories import check_category_counts
from fragrelease.protocol.kind import Block, KindConfig, Line, ReleaseFigures, ReleaseKind, TextTable, warning_line
from fragrelease.protocol.options import OPTION_NAMES

#: The release options only the synthetic kind reads: refused here when given (they would do nothing).
SYNTHESIS_OPTIONS = ("synthesis_target", "synthesis_bins", "synthesis_collusion")
_SYNTHETIC_ONLY = "for linkage: synthetic only; microaggregation has no model to fit"
#: The preview table's columns aligned left (the rest are figures).
_TEXT_COLUMNS = ("attribute", "owner", "kind", "check")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[str]) -> TextTable:
    return TextTable(tuple(header), tuple(tuple(r) for r in rows), left=tuple(h for h in header if h in left))


class IRKind(ReleaseKind):
    """An IR release (microaggregation with (i)DP noise on each owner's fragment) whose rows are
    :attr:`linkage` (:mod:`fragrelease.idpir.linkage`)."""

    owner_preview = "fragrelease.jobs.idpir.owner_preview:owner_preview"
    unused_keys = {key: _SYNTHETIC_ONLY for key in SYNTHESIS_OPTIONS}

    def __init__(self, linkage: IRLinkage) -> None:
        self.linkage = linkage
        self.name = linkage.name
        self.single_owner = linkage.rows_are_records  # one owner's protect() keeps its rows linked

    def config_problems(self, cfg: KindConfig) -> list[str]:
        problems = []
        if cfg.keep_id and self.linkage.shuffles_columns:
            problems.append(f"keep_id: true cannot be used with linkage: {self.name} (the id would link the rows)")
        if cfg.k is None:
            problems.append(f"k: required by linkage: {self.name} (the cluster size of individual-ranking "
                            "microaggregation, >= 3; docs/specification.md §1)")
        return problems

    def check_plan_options(self, *, keep_id: bool) -> None:
        if self.linkage.shuffles_columns and keep_id:
            raise InvalidParameterError(f"keep_id cannot be used with linkage {self.name!r}: an id column would link "
                                        "the rows")

    def guarantee(self, *, mechanism: str, epsilon: str, composition: str, category_order: str,
                  keep_id: bool = False, fragmentation: str = "horizontal", single_process: bool = False,
                  risk_check: bool = False) -> dict[str, str]:
        return release_guarantee(mechanism=mechanism, epsilon=epsilon, composition=composition, linkage=self.name,
                                 category_order=category_order, keep_id=keep_id, fragmentation=fragmentation,
                                 single_process=single_process, risk_check=risk_check)

    def provenance_terms(self, prov: Mapping[str, Any], owners: Sequence[Any]) -> dict[str, Any]:
        # the synthesis options do not act on a microaggregated release
        return {key: value for key, value in prov.items() if key not in SYNTHESIS_OPTIONS}

    def check_schema(self, cfg: KindConfig, attributes: Sequence[Any]) -> None:
        check_category_counts(attributes, dataset=cfg.dataset)  # 200,000 categories: refused here, not after hours

    def check_table_size(self, cfg: KindConfig, records: int) -> None:
        k = resolve_k(get_mechanism(cfg.mechanism), required_k(cfg.k, linkage=cfg.linkage))
        if k > records:
            raise ConfigError(f"k: {cfg.k} exceeds the {records} records of the built-in dataset "
                              f"{cfg.dataset!r}")

    def preview(self, cfg: KindConfig, attributes: Sequence[Any], *, rows: Optional[int], builtin_rows: Optional[int],
                threshold: float, suggestions: bool = True) -> Any:
        """The accuracy preview (:func:`fragrelease.idpir.preview.preview`): a
        :class:`~fragrelease.idpir.preview.ReleasePreview`; a simulation of a built-in table uses its size."""
        from fragrelease.idpir.preview import preview

        specs = [a.public_spec() for a in attributes]
        return preview(cfg, specs, rows=builtin_rows if rows is None else rows, threshold=threshold,
                       with_suggestions=suggestions)

    def preview_blocks(self, pv: Any, *, suggestions: bool = True) -> list[Block]:
        from fragrelease.idpir.preview_table import table_header, table_rows, table_title

        out: list[Block] = [Line(table_title(pv)), _table(table_header(pv), table_rows(pv), _TEXT_COLUMNS)]
        warning = pv.warning_text()
        if warning:
            out.append(warning_line(warning))
        if suggestions and pv.suggestions is not None:
            out += [Line(f"  suggestion: {line}") for line in pv.suggestions.lines()]
        return out + [Line(f"  note: {note}") for note in pv.notes]

    def plan_heading(self, cfg: KindConfig, config_path: str) -> str:
        return (f"{config_path}: {cfg.fragmentation} release of {cfg.dataset}, {len(cfg.owners)} owners, "
                f"ε {cfg.epsilon}, k {cfg.k}, {cfg.mechanism}, category order {cfg.category_order}")

    def run_warning(self, cfg: KindConfig, attributes: Sequence[Any], *, builtin_rows: Optional[int]) -> Optional[str]:
        return self.preview(cfg, attributes, rows=None, builtin_rows=builtin_rows, threshold=0.5,
                            suggestions=False).warning_text()

    def terms_text(self, cfg: KindConfig) -> str:
        return f"k {cfg.k}, {cfg.mechanism}"

    def summary_blocks(self, cfg: KindConfig, result: ReleaseFigures, *,
                       owner_reports: Sequence[tuple[str, str]] = ()) -> list[Block]:
        from fragrelease.idpir.metrics import SCALE_TEXT
        from fragrelease.idpir.preview import preview_from_provenance

        prov = result.provenance
        out: list[Block] = [Line(f"owner {name}: private report {path}", soft_wrap=True) for name, path in owner_reports]
        out.append(TextTable(("owner", "records", "attributes", "ε_j"),
                             tuple((o.name, f"{o.records:,}", str(len(o.attributes)), str(o.epsilon))
                                   for o in result.owners),
                             left=("owner",), style="summary",
                             title=f"{cfg.name}: {prov['fragmentation']} release of {prov['dataset']}"))
        # MeanSSE is computed from the originals: private to whoever runs this, never part of the release
        mean_sse = ("not evaluated" if result.mean_sse is None
                    else f"{result.mean_sse:.4f} (private: from the originals)")
        # every release option as the release recorded it (fragrelease/protocol/options.py), whatever it is
        options = " | ".join(f"{name.replace('_', ' ')} {prov[name]}" for name in OPTION_NAMES if name in prov)
        out.append(Line(f"rows {result.rows:,} | total ε {result.epsilon} ({result.composition} composition) | "
                        f"k {prov['k']} | mechanism {prov['mechanism']} | {options} | MeanSSE vs original {mean_sse}",
                        highlight=None))
        out.append(Line(f"MeanSSE {mean_sse}: {SCALE_TEXT}"))
        guarantee = prov["guarantee"]
        # one line per part of the statement (was one line of about 1,900 characters)
        out += [Line(f"guarantee: per column, {guarantee['per_column']}.", highlight=None),
                Line(f"  whole table: {guarantee['table']}.", highlight=None),
                Line(f"  against whom: {guarantee['against']}.", highlight=None)]
        if "hand_over" in guarantee:  # risk_check: the owners' advisory check adds nothing to the guarantee
            out.append(Line(f"hand-over: {guarantee['hand_over']}."))
        # the accuracy table of the release's public parameters only
        return out + self.preview_blocks(preview_from_provenance(prov), suggestions=False)

    def owner_preview_blocks(self, pv: Any, cfg: Any, runs: int) -> list[Block]:
        out: list[Block] = [
            Line(f"owner {pv.owner} (source {pv.source}): {pv.n:,} records, {cfg.mechanism}, k {cfg.k}, "
                 f"postprocess {pv.postprocess}, {runs} simulated releases per attribute"),
            _table(pv.header(), pv.rows(), ("attribute", "kind", "check"))]
        warning = pv.warning_text()
        if warning:
            out.append(warning_line(warning))
        out.append(Line(f"  ranking (best kept first): {', '.join(pv.ranking())}"))
        return out + [Line(f"  note: {note}") for note in pv.notes]


#: ``linkage: linked``: the paper's rows, one per record.
LINKED = IRKind(LINKED_ROWS)
#: ``linkage: unlinked``: every column in its own random order.
UNLINKED = IRKind(UNLINKED_ROWS)
