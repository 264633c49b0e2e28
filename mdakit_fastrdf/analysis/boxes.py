r"""What the analyses record about the periodic box of every frame: the summed volume, from
which the number densities ``results.rho`` follow for every ``norm``, and the smallest
perpendicular width, against which ``range`` is checked once at the end of a run.

:class:`BoxStatistics` is a mixin of the histogram analyses (``InterRDF``, ``InterRDF_s``,
``SpeciesRDF`` and its subclasses). Both figures are sums or minima over frames, so every
parallel backend and split of the frames gives the same values.

The perpendicular widths of a box with edge vectors :math:`\mathbf a, \mathbf b, \mathbf c`
and volume :math:`V` are the distances between opposite faces,

.. math::

    w_a = \frac{V}{|\mathbf b \times \mathbf c|}, \qquad
    w_b = \frac{V}{|\mathbf c \times \mathbf a|}, \qquad
    w_c = \frac{V}{|\mathbf a \times \mathbf b|}

(the box lengths of an orthorhombic box). A sphere of radius :math:`r \le \min_i w_i / 2`
around an atom holds at most one image of every other atom; beyond it, the sphere reaches
its own periodic images.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..engine import NO_BOX, ORTHO, Box
from .checks import _user_stacklevel

__all__ = ["BoxStatistics", "box_widths", "half_width_error", "half_width_message",
           "number_densities"]

#: What each perpendicular width spans, for messages.
_WIDTH_NAMES = ("a (between the b–c faces)", "b (between the c–a faces)",
                "c (between the a–b faces)")


def box_widths(box: Box) -> np.ndarray:
    """The perpendicular widths :math:`(w_a, w_b, w_c)` in Å of a periodic
    :class:`~mdakit_fastrdf.engine.Box` (the module docstring gives the formula), in
    float64 from its float32 vectors (scalar arithmetic: a few µs per box, where NumPy's
    cross products take 0.2 ms)."""
    (ax, ay, az), (bx, by, bz), (cx, cy, cz) = box.vectors32.tolist()  # exact Python floats
    if box.kind == ORTHO:
        return np.array([ax, by, cz])
    # the cross products b x c, c x a, a x b and the volume a . (b x c)
    bc = (by * cz - bz * cy, bz * cx - bx * cz, bx * cy - by * cx)
    ca = (cy * az - cz * ay, cz * ax - cx * az, cx * ay - cy * ax)
    ab = (ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx)
    volume = abs(ax * bc[0] + ay * bc[1] + az * bc[2])
    return np.array([volume / math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
                     for v in (bc, ca, ab)])


def half_width_message(rmax: float, widths, triclinic: bool) -> str | None:
    """The warning for a histogram reaching `rmax` in boxes whose smallest perpendicular
    widths over the frames are `widths` (``(3,)``), or None when ``rmax`` is within half
    the smallest width."""
    widths = np.asarray(widths, dtype=np.float64)
    if not np.all(np.isfinite(widths)):
        return None
    axis = int(np.argmin(widths))
    half = widths[axis] / 2
    if not rmax > half * (1 + 1e-12):
        return None
    what = (f"width along {_WIDTH_NAMES[axis]}" if triclinic
            else f"length along {'abc'[axis]}")
    image = (" (the true minimum image, also in this triclinic box, where MDAnalysis's "
             "InterRDF can miss it)" if triclinic else "")
    return (
        f"range reaches rmax = {rmax:g} Å, beyond half the smallest box width: the box's "
        f"{what} is {widths[axis]:.6g} Å at its smallest over the analysed frames, half of "
        f"it {half:.6g} Å. Each pair is counted once, at its minimum-image distance{image}, "
        f"so beyond {half:.6g} Å the shells miss the further images of the atoms and g(r) "
        f"falls below its bulk value: the RDF is complete only up to rmax = {half:.6g} Å."
    )


def half_width_error(rmax: float, box: Box, reason: str, where: str) -> str | None:
    """The error for an analysis that needs g(r) whole up to `rmax` (a transform, an
    integral) in a box (of frame `where`) whose half smallest perpendicular width is below
    it, or None: `reason` says what would be wrong."""
    half = float(np.min(box_widths(box))) / 2
    if not rmax > half * (1 + 1e-9):
        return None
    return (f"{where}: range (0, {rmax:g}) reaches beyond half the smallest box width "
            f"({half:.4g} Å): g(r) there misses pairs (minimum image), so {reason}; use "
            f"r_max <= {half:.4g}")


def number_densities(sizes, volume_cum, n_frames):
    r"""The frame-averaged number densities :math:`\rho = N / \langle V \rangle` (Å⁻³) of
    groups of `sizes` atoms, :math:`\langle V \rangle = ` ``volume_cum / n_frames``; None
    when a frame had no box (``volume_cum`` NaN)."""
    volume_cum = float(volume_cum)
    if not np.isfinite(volume_cum) or volume_cum <= 0 or n_frames < 1:
        return None
    return np.asarray(sizes, dtype=np.float64) / (volume_cum / n_frames)


def _min_parts(values):
    """Aggregate the workers' smallest widths (ResultsGroup lookup)."""
    return np.min(np.asarray(values, dtype=np.float64), axis=0)


class BoxStatistics:
    """Mixin of a :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase` subclass: adds
    ``results.box_volume_cum`` (the summed box volume of the frames, whatever ``norm``;
    NaN when a frame has no box) and ``results.min_box_widths`` (the smallest perpendicular
    width of each box axis over the frames, Å; inf without a box), and warns once, at the
    end of :meth:`run`, when ``range`` reaches beyond half the smallest width.

    A subclass gives the atom counts of its densities (:meth:`_density_sizes`) and calls
    :meth:`_set_densities` in its ``_normalise``; blocks get ``block_rho`` and ``rho_sem``.

    One box policy for every analysis: an RDF beyond half the smallest box width is
    incomplete, which the run says in a warning (MDAnalysis's InterRDF computes it too);
    an analysis whose result needs g(r) whole up to r_max (a transform, an integral) sets
    :attr:`half_width_reason` (what would be wrong), and then a box too narrow is a
    ``ValueError``: at construction for the current frame (:meth:`_require_half_width`)
    and in the run for the first frame of each new box.
    """

    #: None: beyond half the smallest box width warns; a text: it is an error, the text
    #: saying what would be wrong (e.g. "the transform would be wrong")
    half_width_reason: str | None = None

    def _require_half_width(self, box: Box, where="the current frame"):
        """Raise the error of :func:`half_width_error` for `box` when the analysis needs
        g(r) whole (:attr:`half_width_reason`)."""
        if self.half_width_reason is None:
            return
        message = half_width_error(self.rdf_settings["range"][1], box,
                                   self.half_width_reason, where)
        if message is not None:
            raise ValueError(message)

    def _prepare(self):
        super()._prepare()
        # the frames' sum is kept in a plain attribute and stored in results at the end of
        # the worker's frames (_compute): assigning a Results attribute costs ~40 µs, as
        # MDAnalysis checks the name against dir() on every assignment
        self.results.box_volume_cum = 0.0
        self.results.min_box_widths = np.full(3, np.inf)
        self._min_widths = [math.inf] * 3  # the frames' minimum, stored at the end (_compute)
        self._volume_sum = 0.0
        self._box_seen = None  # (bytes of the box vectors, volume, widths) of the last box

    def _frame_box(self) -> Box:
        box = super()._frame_box()
        if box.kind == NO_BOX:
            self._volume_sum = math.nan
            return box
        key = box.vectors32.tobytes()  # the box the kernels use (from ts.dimensions)
        seen = self._box_seen
        if seen is None or seen[0] != key:
            # a new box: its volume (MDAnalysis's ts.volume, as volume_cum) and widths, kept
            # until the box changes
            volume = self._ts.volume if box.volume is None else box.volume
            seen = self._box_seen = (key, volume, box_widths(box).tolist())
            self._require_half_width(box, f"frame {self._ts.frame}")
            self._min_widths = [min(a, b) for a, b in zip(self._min_widths, seen[2])]
        self._volume_sum += seen[1]
        return box

    def _compute(self, *args, **kwargs):
        out = super()._compute(*args, **kwargs)
        self.results.box_volume_cum = float(self._volume_sum)
        self.results.min_box_widths = np.array(self._min_widths, dtype=np.float64)
        return out

    def _block_lookup(self):
        # the base merges these lookups into its aggregator (the box figures are merged
        # with the counts, blocks or not)
        lookup = dict(super()._block_lookup())
        lookup.update({"box_volume_cum": _sum_parts, "min_box_widths": _min_parts})
        return lookup

    def _conclude(self):
        super()._conclude()
        message = self._half_width_message()
        if message is not None:
            warnings.warn(message, UserWarning, stacklevel=_user_stacklevel())

    def _half_width_message(self):
        """The warning when ``range`` reaches beyond half the smallest box width, or None (a
        subclass whose distances are not three-dimensional gives its own)."""
        if getattr(self, "geometry", None) is not None:
            return self.geometry.half_width_message(self.results.get("frame_plane"),
                                                    self.rdf_settings["range"][1])
        return half_width_message(self.rdf_settings["range"][1],
                                  self.results.get("min_box_widths", np.inf),
                                  self._is_triclinic())

    def _is_triclinic(self):
        """Whether a frame of the run had a triclinic box (a worker's flag does not come
        back; the current frame's box says it for the usual trajectory of one box type)."""
        from ..engine import TRICLINIC, prepare_box

        try:
            return prepare_box(self._trajectory.ts.dimensions).kind == TRICLINIC
        except ValueError:
            return False

    def _density_sizes(self):
        """The atom counts whose densities ``results.rho`` holds (an analysis gives them)."""
        raise NotImplementedError

    def _set_densities(self, res):
        """``res.rho = sizes / <V>`` for the results `res` of the run (from its
        ``_normalise``); nothing when a frame had no box, or for a block's results (whose
        densities :meth:`_conclude_blocks` adds)."""
        if "box_volume_cum" not in res:
            return
        rho = number_densities(self._density_sizes(), res.box_volume_cum, self.n_frames)
        if rho is not None:
            res.rho = rho

    #: whether ``results.rho`` is N / <V> (three-dimensional): then the blocks' densities
    #: come from their summed volumes here; an analysis whose densities are of another
    #: kind (LateralRDF's per area) gives its blocks' ``rho`` in its ``_normalise``
    volume_densities: bool = True

    def _conclude_blocks(self):
        """The base's blocks, and ``block_rho`` / ``rho_sem`` from the blocks' own frames
        and summed volumes (when :attr:`volume_densities`)."""
        super()._conclude_blocks()
        full = self.results
        if (not self.volume_densities or "rho" not in full
                or "block_volume_cum" not in full):
            return
        sizes = self._density_sizes()
        rows = [number_densities(sizes, v, n) for v, n in zip(full.block_volume_cum,
                                                             full.block_n_frames)]
        if any(r is None for r in rows):
            return
        from .blocks import block_sem

        full.block_rho = np.stack(rows)
        full.rho_sem = block_sem(full.block_rho)


def _sum_parts(values):
    """Aggregate the workers' summed volumes (NaN stays NaN: a frame had no box)."""
    return float(np.sum(np.asarray(values, dtype=np.float64)))


def _box_fields():
    from .declarations import Field

    return (
        Field("rho", "Å^-3", "frame-averaged number density N / <V> of each group",
              blocks=True),
        Field("box_volume_cum", "Å^3", "sum of the box volumes of the frames, every norm "
              "(NaN when a frame has no box)"),
        Field("min_box_widths", "Å", "smallest perpendicular width of each box axis over "
              "the frames"),
    )


#: The declared outputs of :class:`BoxStatistics` (``rho`` is set by the analysis).
BOX_FIELDS = _box_fields()
