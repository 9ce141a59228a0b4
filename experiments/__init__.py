"""Paper reproductions, the evaluation grid, the audits and their figures (installed as ``fragrelease.experiments``).

Nothing on a release path imports this package; the CLI's experiment commands (``fragrelease
evaluate``, ``audit``, ``diffgen experiment``, ``tiers experiment``) import it inside the command.
It needs the ``experiments`` extra (scikit-learn).

- :mod:`~fragrelease.experiments.evaluation`, :mod:`~fragrelease.experiments.evaluate_grid`,
  :mod:`~fragrelease.experiments.figures`: iDP-IR information loss over the (ε, k) grid (Spark-free
  core, Spark driver, PNG figures);
- :mod:`~fragrelease.experiments.audit`: empirical privacy audits of iDP-IR releases;
- :mod:`~fragrelease.experiments.publications`: composition attacks and δ-cloning on Adult;
- :mod:`~fragrelease.experiments.tiers`: the German Credit tier chains;
- :mod:`~fragrelease.experiments.diffgen`: DiffGen's classification experiment on Adult.
- :mod:`~fragrelease.experiments.downstream`: classifiers and marginals of IR releases next to
  OpenDP's MST/AIM and dpmm's MST (:mod:`~fragrelease.experiments.dpmm_mst` runs in dpmm's own venv).
"""
