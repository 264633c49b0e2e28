"""Analyses that make a straggler of one node backend worker (for the scheduler's tests).

Not in conftest.py, which imports nothing of the package."""

import time

from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.engine import worker_placement


class SlowWorkerRDF(InterRDF):
    """Worker rank 0 takes 1.5 s a frame."""

    def _single_frame(self):
        p = worker_placement()
        if p is not None and p.rank == 0:
            time.sleep(1.5)
        super()._single_frame()


class SlowWorkerLateHelperRDF(SlowWorkerRDF):
    """As SlowWorkerRDF, and worker rank 1 starts 1 s late (its copy of the analysis), so
    that the slow worker surely takes the first part, whatever the machine's load: the
    late worker then recomputes it and its copy at the slow worker is cancelled."""

    def __setstate__(self, state):
        self.__dict__.update(state)
        p = worker_placement()
        if p is not None and p.rank == 1:
            time.sleep(1.0)
