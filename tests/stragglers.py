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
