"""``python -m fragrelease.jobs.cli ARGS``: the ``fragrelease`` command line."""
import sys

from fragrelease.jobs.cli import main

sys.exit(main())
