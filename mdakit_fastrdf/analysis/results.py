"""The results object of the package's analyses."""

from __future__ import annotations

from MDAnalysis.analysis.results import Results

__all__ = []


class _Results(Results):
    """MDAnalysis's :class:`~MDAnalysis.analysis.results.Results`, whose check of a new key
    (no attribute of the class may be shadowed) runs once per name instead of on every
    assignment: it calls ``dir()`` (~40 µs), and an analysis assigns results a few times
    per frame. ``dir()`` of a Results object is its class's attributes and ``data``, the
    same for every object, so a name that passed once always passes."""

    _valid_keys: set = set()

    def _validate_key(self, key):
        if key in _Results._valid_keys:
            return
        super()._validate_key(key)
        if isinstance(key, str):
            _Results._valid_keys.add(key)
