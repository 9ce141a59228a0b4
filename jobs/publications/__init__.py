"""Independent publications on Spark (docs/specification.md §5 and §8): :mod:`~fragrelease.jobs.publications.runner`
anonymizes publications (Mondrian, cloning) and audits them for composition attacks, with the math of
``fragrelease.publications``.
"""
