"""Progress of a release's steps: one event when a step starts and one when it ends, with its time.

:meth:`fragrelease.jobs.api.Release.run` reports each step to its ``progress=`` callback as a
:class:`ProgressEvent`. Without a callback the events go to the Python logger
``fragrelease.progress`` (:data:`LOGGER`): the end of each step at INFO, one line with the step
number, the party and the elapsed time, so job logs, notebooks and redirected output show how far a
long release got (``step 4/8 owner clinic-a: protecting 10 attributes … done in 12.4 s``); its start
at DEBUG. The events carry public facts only (step, party, attribute counts, seconds), never data.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Optional

#: The logger that receives progress when no callback is given (INFO: one line per finished step).
LOGGER = logging.getLogger("fragrelease.progress")

Status = Literal["started", "done", "failed"]


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a release starting or ending.

    Attributes
    ----------
    step : 1-based number of the step; ``total``: how many steps this run has.
    party : ``owner``, ``aggregator`` or ``driver`` (simulation and evaluation, run by the local driver).
    owner : the data owner's name for owner steps, else None.
    action : what the step does, e.g. ``protecting 10 attributes``.
    status : ``started`` (before the step), ``done`` or ``failed`` (after it).
    seconds : wall-clock seconds the step took (None while ``started``).

    ``str(event)`` is the line logged: ``step 4/8 owner clinic-a: protecting 10 attributes … done in 12.4 s``.
    """

    step: int
    total: int
    party: str
    owner: Optional[str]
    action: str
    status: Status
    seconds: Optional[float] = None

    @property
    def done(self) -> bool:
        """True once the step has ended (``done`` or ``failed``)."""
        return self.status != "started"

    @property
    def label(self) -> str:
        """``step 4/8 owner clinic-a: protecting 10 attributes`` (the step without its status)."""
        who = f"owner {self.owner}" if self.owner is not None else self.party
        return f"step {self.step}/{self.total} {who}: {self.action}"

    def __str__(self) -> str:
        if self.status == "started":
            return f"{self.label} …"
        return f"{self.label} … {'done in' if self.status == 'done' else 'failed after'} {self.seconds:.1f} s"


def log_progress(event: ProgressEvent) -> None:
    """The default callback: ended steps at INFO (failed ones at WARNING), started ones at DEBUG."""
    if event.status == "started":
        LOGGER.debug("%s", event)
    elif event.status == "done":
        LOGGER.info("%s", event)
    else:
        LOGGER.warning("%s", event)


class Steps:
    """Numbers a run's steps and reports each one's start and end to ``callback``.

    ``total`` is known before the first step (the caller counts its owners), so every line says how
    far the run is. A failing step is reported as ``failed`` and its exception propagates unchanged.
    """

    def __init__(self, total: int, callback: Optional[Callable[[ProgressEvent], None]] = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.total = total
        self.callback = callback if callback is not None else log_progress
        self._clock = clock
        self._n = 0

    @contextmanager
    def step(self, party: str, action: str, owner: Optional[str] = None) -> Iterator[None]:
        self._n += 1
        n = self._n
        self.callback(ProgressEvent(n, self.total, party, owner, action, "started"))
        start = self._clock()
        try:
            yield
        except BaseException:
            self.callback(ProgressEvent(n, self.total, party, owner, action, "failed", self._clock() - start))
            raise
        self.callback(ProgressEvent(n, self.total, party, owner, action, "done", self._clock() - start))
