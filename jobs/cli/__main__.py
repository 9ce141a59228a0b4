"""``python -m fragrelease.jobs.cli ARGS``: the ``fragrelease`` command line."""
import sys

from . import main

sys.exit(main())
