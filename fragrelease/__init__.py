"""fragrelease: privacy-preserving releases over fragmented data; this package is the Spark-free math.

It imports nothing from the Spark side (``tests/test_architecture.py`` checks it). Shared core:
:mod:`~fragrelease.errors`, :mod:`~fragrelease.version`, :mod:`~fragrelease.rng` (the one source of
randomness: ``laplace``, ``diffgen``, ``secure``),
:mod:`~fragrelease.budget` (exact ε arithmetic), :mod:`~fragrelease.validation` and
:mod:`~fragrelease.taxonomy` (the generalization hierarchy), :mod:`~fragrelease.accuracy` (intervals of
Laplace noise), :mod:`~fragrelease.kinds` (the release kinds' one registry). The fragmented-release
protocol shared by every release kind: :mod:`fragrelease.protocol`. One subpackage per system or kind:

- :mod:`fragrelease.idpir`: iDP-IR microaggregation releases over fragmented data (kinds ``linked``, ``unlinked``);
- :mod:`fragrelease.synthesis`: marginal synthesis over horizontal fragments (kind ``synthetic``);
- :mod:`fragrelease.publications`: Mondrian, cloning and the composition-attack audit;
- :mod:`fragrelease.tiers`: tiered releases with increasing privacy;
- :mod:`fragrelease.diffgen`: DiffGen and two-party DistDiffGen.

The Spark jobs that apply it are in ``fragrelease.jobs`` (repository folder ``jobs/``), the pandas
UDFs in ``fragrelease.udfs`` (``udfs/``), the dataset declarations in ``fragrelease.schemas``
(``schemas/``) and the paper reproductions in ``fragrelease.experiments`` (``experiments/``).
"""

from pkgutil import extend_path

from fragrelease.version import __version__ as __version__  # re-exported

# The strict editable install (scripts/setup.sh) puts a tree of links, laid out as the wheel is, on
# the path; a checkout's own fragrelease/ folder (the current directory under ``python -m``) comes
# first and has no jobs/, udfs/, ... inside. Extending the package path to every ``fragrelease``
# folder on sys.path lets ``fragrelease.jobs`` resolve through the tree then. An installed wheel has
# one such folder, and this changes nothing.
__path__ = extend_path(__path__, __name__)

#: Names served lazily from the Spark side (:mod:`fragrelease.jobs.api`): ``fragrelease.protect`` and
#: ``fragrelease.Release``. The import happens on first access only, so ``import fragrelease`` stays
#: Spark-free; this is the one exception to the layering that ``tests/test_architecture.py`` allows.
_LAZY_API = ("protect", "Release", "ProtectResult", "ReleaseResult")


def __getattr__(name: str):
    if name in _LAZY_API:
        from fragrelease.jobs import api  # the allowed lazy facade (tests/test_architecture.py)

        return getattr(api, name)
    raise AttributeError(f"module 'fragrelease' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY_API])
