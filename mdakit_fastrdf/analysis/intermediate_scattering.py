r"""Intermediate scattering functions: the self part :math:`F_s(q, t)` and the coherent
:math:`F(q, t)`, per species and species pair.

Each frame the analysis keeps the k-space amplitudes of every species over the reciprocal
vectors of each :math:`|q|` shell (the package's k-space engine, CPU or GPU) and the
atoms' positions; at the end it correlates them over the time origins. The per-frame rows
are gathered in frame order from every parallel backend, so the results do not depend on
the backend.
"""

from __future__ import annotations

import numbers

import numpy as np
from MDAnalysis.analysis.results import Results

from ..engine import NO_BOX, prepare_box
from .base import PairHistogramBase, PairLayout
from .checks import check_atomgroup
from .declarations import Command, Curve, Field, Option, OutputSpec
from .dynamics import (
    DEMO,
    LAG_FIELDS,
    CorrelationRun,
    check_lags,
    check_static,
    command_options,
    origin_frames,
    time_correlation,
    time_step,
    unwrap_positions,
)
from .kspace_frames import KSpaceFrames
from .memory import available_memory_bytes
from .scattering import species_elements, species_weights
from .species import group_species

__all__ = ["IntermediateScattering", "incoherent_scattering_length"]

#: Bytes of FFT workspace of the coherent correlations: the vectors are correlated in chunks
#: of about this size, so that memory beyond the per-frame amplitudes stays bounded.
CORRELATION_CHUNK_BYTES = 1 << 28


def incoherent_scattering_length(element) -> float:
    r"""The bound incoherent neutron scattering length of an element (fm),
    :math:`b_\mathrm{inc} = \sqrt{\sigma_\mathrm{inc} / 4\pi}`, from ``periodictable``'s
    incoherent cross-section :math:`\sigma_\mathrm{inc}` (barn; Sears, Neutron News 3, 26,
    1992, via the Atominstitut table).

    >>> from mdakit_fastrdf.analysis.intermediate_scattering import (
    ...     incoherent_scattering_length)
    >>> round(incoherent_scattering_length("H"), 2)  # hydrogen: sigma_inc = 80.26 barn
    25.27
    """
    import periodictable

    from .scattering import element_symbol

    symbol = element_symbol(element)
    el = periodictable.elements.symbol(symbol)
    sigma = getattr(getattr(el, "neutron", None), "incoherent", None)
    if sigma is None or not np.isfinite(sigma):
        raise ValueError(f"element: the neutron table has no incoherent cross-section for "
                         f"{symbol!r}; give the self weights yourself (weights={{label: value}})")
    return float(np.sqrt(float(sigma) * 100.0 / (4.0 * np.pi)))  # 1 barn = 100 fm^2


def _check_q(q) -> np.ndarray:
    try:
        arr = np.atleast_1d(np.asarray(q, dtype=np.float64))
    except (TypeError, ValueError):
        raise TypeError(f"q must be a number or a sequence of numbers (1/Å), got {q!r}") from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"q must be one or more finite |q| > 0 (1/Å), got {q!r}")
    return arr


class IntermediateScattering(CorrelationRun, KSpaceFrames, PairHistogramBase):
    r"""Self and coherent intermediate scattering functions of an AtomGroup.

    For the shells :math:`|\mathbf{k}| \in [q - \Delta q/2,\ q + \Delta q/2)` of the
    reciprocal lattice of the (constant) box, with the amplitudes
    :math:`\rho_a(\mathbf{k}, t) = \sum_{j \in a} e^{i \mathbf{k}\cdot\mathbf{r}_j(t)}` of
    each species :math:`a`:

    .. math::

        F_{ab}(q, t) = \frac{1}{N} \Bigl\langle \mathrm{Re}\,
            \tfrac12\bigl[\rho_a(\mathbf{k}, t_0)\, \rho_b^*(\mathbf{k}, t_0 + t)
            + \rho_b(\mathbf{k}, t_0)\, \rho_a^*(\mathbf{k}, t_0 + t)\bigr]
            \Bigr\rangle_{\mathbf{k} \in q,\ t_0}

    (:math:`N` atoms in all), the coherent total

    .. math::

        F(q, t) = \frac{\sum_{a, b} w_a w_b F_{ab}(q, t)}{\sum_a c_a w_a^2},

    which with ``weights='number'`` is :math:`\langle \rho(\mathbf{k}, t_0)
    \rho^*(\mathbf{k}, t_0 + t)\rangle / N` and at :math:`t = 0` the static structure
    factor :math:`S(q)` of the same vectors, and the self part

    .. math::

        F_{s,a}(q, t) = \Bigl\langle \frac{\sin q|\Delta\mathbf{r}_j|}{q |\Delta\mathbf{r}_j|}
            \Bigr\rangle_{j \in a,\ t_0}, \qquad
        \Delta\mathbf{r}_j = \mathbf{r}_j(t_0 + t) - \mathbf{r}_j(t_0),

    from positions made whole across the box (:func:`~.dynamics.unwrap_positions`), with
    the total :math:`F_s = \sum_a N_a v_a^2 F_{s,a} / \sum_a N_a v_a^2`. The weights
    :math:`w_a` are those of ``weights`` (:func:`~.scattering.species_weights`); the self
    weights :math:`v_a` are the same, except for ``'neutron'``: the incoherent scattering
    lengths :math:`b_\mathrm{inc}` (:func:`incoherent_scattering_length`), since hydrogen's
    incoherent scattering dominates quasi-elastic neutron scattering. The time correlations
    use FFTs when every frame is a time origin (Wiener–Khinchin, as dynasor does: Fransson
    et al., Adv. Theory Simul. 4, 2000240, 2021, doi:10.1002/adts.202000240).

    Parameters
    ----------
    atomgroup : AtomGroup
        The atoms.
    q : float or sequence of float
        Shell centres :math:`q` (1/Å, > 0).
    lags : int or sequence of int
        Lags in analysed frames: an int ``L`` means ``0 .. L``.
    by : str, mapping, callable or list of AtomGroups
        Species, as :class:`~mdakit_fastrdf.SpeciesRDF` groups them (default
        ``'element'``; species must not overlap).
    weights : {'number', 'xray', 'neutron'} or mapping
        Scattering weights of the species (:func:`~.scattering.species_weights`);
        X-ray form factors are taken at each shell's :math:`q`.
    origins : int
        Every ``origins``-th analysed frame is a time origin (1: all, with FFTs).
    dq : float, optional
        Shell width (1/Å). Default: :math:`2\pi / L_\max`, the reciprocal spacing of the
        box's longest edge.
    self_part, coherent : bool
        Compute :math:`F_s` (keeps every frame's positions) and :math:`F` (keeps every
        frame's amplitudes); both by default.
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}
        Where the amplitudes are summed (``'auto'``: the CPU, the same bits in every
        worker).
    n_threads : int, optional
        CPU threads of the amplitude sums.

    Attributes
    ----------
    results.q, results.dq : numpy.ndarray, float
        Shell centres and width (1/Å); ``results.n_vectors``: vectors per shell.
    results.lags, results.times : numpy.ndarray
        Lags (frames) and times (ps: the analysed frames' spacing times the lag).
    results.f_coherent : numpy.ndarray
        ``(n_pairs, n_lags, n_q)`` :math:`F_{ab}`, pairs ``results.pairs`` (a <= b).
    results.f_total : numpy.ndarray
        ``(n_lags, n_q)`` :math:`F(q, t)`.
    results.f_self : numpy.ndarray
        ``(n_species, n_lags, n_q)`` :math:`F_{s,a}`; ``results.f_self_total`` the total.

    Raises
    ------
    ValueError
        No periodic box, a box that changes with ``coherent=True`` (the coherent part is
        for constant volume; the self part alone takes a changing box), a shell
        without a reciprocal vector, lags beyond the run, frames not evenly spaced in time,
        a stride too long to unwrap positions, or more memory than the machine has.

    Examples
    --------
    >>> from mdakit_fastrdf.analysis.intermediate_scattering import IntermediateScattering
    >>> isf = IntermediateScattering(u.select_atoms("name OW"), q=[1.0, 2.0],   # doctest: +SKIP
    ...                              lags=20).run()
    >>> isf.results.f_self_total[:, 0]   # F_s(q = 1/Å, t) over the lags  # doctest: +SKIP
    """

    #: the amplitudes are float64 sums of one kernel: no ``precision`` or ``method``
    compute_keywords = ("device", "n_threads")
    outputs = OutputSpec(fields=(
        Field("q", "1/Å", "shell centre |q|"),
        *LAG_FIELDS,
        Field("n_vectors", "", "reciprocal vectors in each shell", integer=True),
        Field("f_coherent", "", "coherent F_ab(q, t) of each species pair"),
        Field("f_total", "", "weighted coherent F(q, t)"),
        Field("f_self", "", "self F_s(q, t) of each species"),
        Field("f_self_total", "", "weighted self F_s(q, t)"),
    ))

    command = Command(
        name="isf",
        help="intermediate scattering functions: self F_s(q, t) and coherent F(q, t)",
        **DEMO,
        options=(
            Option(("--q",), "q", {"nargs": "+", "type": float, "default": [1.0, 2.0],
                                    "metavar": "Q",
                                    "help": "shell centres |q| in 1/Å (default: 1 2)"}),
            Option(("--dq",), "dq", {"type": float, "help": "shell width in 1/Å (default: "
                                                              "2 pi / the longest box edge)"}),
            Option(("--weights",), "weights", {"choices": ("number", "xray", "neutron"),
                                                "help": "scattering weights (default: "
                                                        "number)"}),
            *command_options(),
            Option(("--no-coherent",), "coherent", {"action": "store_const", "const": False,
                                                     "help": "skip the coherent part"}),
        ),
        # (no pair distances: the common --precision does not apply)
        build=lambda cls, groups, kwargs, args: cls(
            *groups, **{k: v for k, v in kwargs.items() if k != "precision"}),
    )

    def __init__(self, atomgroup, q, lags, *, by="element", weights="number", origins=1,
                 dq=None, self_part=True, coherent=True, **kwargs):
        check_atomgroup(atomgroup, "atomgroup")
        check_static(atomgroup, "atomgroup")
        # (no distance histogram: one bin of the base's frame loop, never filled)
        self._init_histograms(atomgroup.universe, 1, (0.0, 1.0), "none", kwargs=kwargs)
        self.atomgroup = atomgroup
        self._init_correlation(lags, origins, self_part=self_part, coherent=coherent)
        species = group_species(atomgroup, by)
        for label, group in species:
            check_static(group, f"by: species {label!r}")
        species.sort(key=lambda s: (-len(s[1]), str(s[0])))
        self.species = [label for label, _ in species]
        self.groups = [g for _, g in species]
        ix = np.concatenate([g.ix for g in self.groups])
        if len(np.unique(ix)) != len(ix):
            raise ValueError("by: the species must not overlap (an atom in two species would "
                             "be counted twice)")
        n = len(self.groups)
        self._pairs = np.array([(a, b) for a in range(n) for b in range(a, n)],
                               dtype=np.int32).reshape(-1, 2)
        self.q = _check_q(q)
        dims = atomgroup.universe.trajectory.ts.dimensions
        box = prepare_box(dims)
        if box.kind == NO_BOX:
            raise ValueError("IntermediateScattering needs a periodic box: the current frame "
                             "has none")
        from MDAnalysis.lib.mdamath import triclinic_vectors

        self._box = np.asarray(triclinic_vectors(dims), dtype=np.float64)
        self._dims = np.asarray(dims, dtype=np.float64).copy()
        if dq is None:
            dq = 2.0 * np.pi / float(np.max(np.linalg.norm(self._box, axis=1)))
        if isinstance(dq, bool) or not isinstance(dq, numbers.Real) or not np.isfinite(dq) \
                or dq <= 0:
            raise ValueError(f"dq must be a positive shell width (1/Å), got {dq!r}")
        self.dq = float(dq)
        self._shells = self._shell_vectors() if self.coherent else None
        self.weights = weights
        elements = None
        if isinstance(weights, str) and weights.lower() in ("xray", "neutron"):
            elements = species_elements(self.groups, self.species)
        self._w = species_weights(self.species, self.q, weights, elements)
        if isinstance(weights, str) and weights.lower() == "neutron":
            self._v = np.array([[incoherent_scattering_length(e)] * len(self.q)
                                for e in elements])
        else:
            self._v = self._w
        self._kspace = None

    # -- k-space shells -------------------------------------------------------------------
    def _shell_vectors(self):
        """``(n, shells)``: the indices of the vectors of every shell (one of each pair
        +-k) and, per shell, the positions of its vectors in ``n``."""
        from ..engine.kspace import reciprocal_vectors

        lo = np.maximum(self.q - 0.5 * self.dq, 0.0)
        hi = self.q + 0.5 * self.dq
        n, kmag = reciprocal_vectors(self._box, q_max=float(hi.max()),
                                     q_min=max(0.0, float(lo.min()) - 1e-12))
        shells, used = [], np.zeros(len(n), dtype=bool)
        for k, (a, b) in enumerate(zip(lo, hi)):
            sel = np.flatnonzero((kmag >= a) & (kmag < b))
            if len(sel) == 0:
                raise ValueError(
                    f"q: the shell {a:.4g} <= |k| < {b:.4g} 1/Å of q = {self.q[k]:.4g} holds no "
                    f"reciprocal vector of this box; choose q nearer the box's reciprocal "
                    f"vectors or a wider dq (now {self.dq:.4g} 1/Å)")
            shells.append(sel)
            used[sel] = True
        keep = np.flatnonzero(used)
        remap = -np.ones(len(n), dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        return np.ascontiguousarray(n[keep]), [remap[s] for s in shells]

    # -- the shared base's hooks ----------------------------------------------------------
    def _layout(self):
        return PairLayout.of_groups(self.groups, self._pairs)

    def _frame_rows(self):
        rows = {"frame_time": (), "frame_box": (6,)}
        if self.coherent:
            shape = (len(self.groups), len(self._shells[0]))
            rows["frame_rho_re"] = shape
            rows["frame_rho_im"] = shape
        if self.self_part:
            rows["frame_positions"] = (len(self._layout().ix), 3)
        return rows

    def _start_part(self, n_frames):
        per_frame = sum(int(np.prod(s)) for s in self._frame_rows().values()) * 8
        need = per_frame * n_frames
        if self.coherent:  # (and the correlations' workspace, a chunk of vectors)
            vectors = min(self._vector_chunk(n_frames), len(self._shells[0]))
            need += vectors * self._workspace_per_vector(n_frames)
        free = available_memory_bytes()
        if free is not None and need > 0.8 * free:
            raise MemoryError(
                f"IntermediateScattering keeps {per_frame / 2**20:.1f} MiB a frame "
                f"({need / 2**30:.1f} GiB for this worker's frames), more than this machine "
                f"has free ({free / 2**30:.1f} GiB); analyse fewer frames, fewer q shells, "
                f"or one part at a time (coherent=False or self_part=False)")
        if self.coherent:
            self._start_kspace()

    def _accumulate(self, pos, box):  # (the frame's rows: kept, and their amplitudes)
        ts = self._ts
        dims = np.asarray(ts.dimensions, dtype=np.float64) if ts.dimensions is not None \
            else None
        if dims is None or prepare_box(dims).kind == NO_BOX:
            raise ValueError(f"frame {ts.frame} has no periodic box: IntermediateScattering "
                             f"needs one in every frame")
        # (equal boxes, the common case, skip allclose: its cost per frame was a tenth of
        # the CPU amplitudes' at 16,000 atoms)
        if self.coherent and not np.array_equal(dims, self._dims) \
                and not np.allclose(dims, self._dims, rtol=1e-6, atol=0.0):
            raise ValueError(
                f"the box of frame {ts.frame} ({dims}) differs from the first one "
                f"({self._dims}): the coherent F(q, t) is for a constant box (NVT), the "
                f"reciprocal vectors of a changing box not being the same vectors. The self "
                f"part takes a changing box (NPT): IntermediateScattering(..., "
                f"coherent=False)")
        self._store_frame("frame_time", ts.time)
        self._store_frame("frame_box", dims)
        if self.coherent:
            self._frame_amplitudes(self._frame_index, pos, self.layout.offsets, self._box,
                                   self._shells[0])
        if self.self_part:
            self._store_frame("frame_positions", pos)

    def _store_amplitudes(self, index, amp):
        self.results["frame_rho_re"][index] = amp.real
        self.results["frame_rho_im"][index] = amp.imag

    def _workspace_per_vector(self, n_frames):
        """Bytes of FFT workspace per vector: the species' transforms and their product."""
        size = 1 << int(np.ceil(np.log2(max(2 * n_frames, 2))))
        return size * len(self.groups) * 16 * 3

    def _vector_chunk(self, n_frames):
        """Vectors correlated at once: their FFT workspace stays near
        :data:`CORRELATION_CHUNK_BYTES` (a function of the run's sizes only, so the sums
        run in the same order on every machine)."""
        return max(1, CORRELATION_CHUNK_BYTES // self._workspace_per_vector(n_frames))

    def _coherent_sums(self, res, lags, shells):
        """``(n_pairs, n_lags, n_q)``: the sums over each shell's vectors of the symmetrised
        time correlations of the species' amplitudes, the vectors taken a chunk at a time
        (the whole run's amplitudes are never held twice)."""
        n_frames, _, n_vectors = res.frame_rho_re.shape
        sums = np.zeros((len(self._pairs), len(lags), len(self.q)))
        ordered = sorted({(int(a), int(b)) for a, b in self._pairs}
                         | {(int(b), int(a)) for a, b in self._pairs})
        chunk = self._vector_chunk(n_frames)
        for c0 in range(0, n_vectors, chunk):
            c1 = min(c0 + chunk, n_vectors)
            rho = res.frame_rho_re[:, :, c0:c1] + 1j * res.frame_rho_im[:, :, c0:c1]
            corr = {(a, b): time_correlation(rho[:, a], None if a == b else rho[:, b], lags,
                                             self.origins, self.n_threads).real
                    for a, b in ordered}
            for s, sel in enumerate(shells):
                local = sel[(sel >= c0) & (sel < c1)] - c0
                if len(local) == 0:
                    continue
                for k, (a, b) in enumerate(self._pairs):
                    sym = 0.5 * (corr[(int(a), int(b))][:, local]
                                 + corr[(int(b), int(a))][:, local])
                    sums[k, :, s] += sym.sum(axis=1)
        return sums

    def _normalise(self, res):
        n_frames = len(res.frame_index)
        lags = check_lags(self._lags_asked, n_frames)
        step = time_step(res.frame_time)
        n_atoms = len(self._layout().ix)
        sizes = np.array([len(g) for g in self.groups], dtype=np.float64)
        out = Results(q=self.q.copy(), dq=self.dq, lags=lags, times=lags * step,
                      species=list(self.species), pairs=self._pairs.copy(),
                      weights=self._w.copy(), self_weights=self._v.copy())
        if self.coherent:
            shells = self._shells[1]
            out.n_vectors = np.array([len(s) for s in shells], dtype=np.int64)
            fab = self._coherent_sums(res, lags, shells) / (out.n_vectors * float(n_atoms))
            out.f_coherent = fab
            num = np.zeros((len(lags), len(self.q)))
            for k, (a, b) in enumerate(self._pairs):
                mult = 1.0 if a == b else 2.0
                num += mult * self._w[a] * self._w[b] * fab[k]
            den = np.sum((sizes / n_atoms)[:, None] * self._w ** 2, axis=0)
            out.f_total = num / den
        if self.self_part:
            from ..engine.displacements import sinc_sums

            pos = unwrap_positions(res.frame_positions, res.frame_box, self.n_threads)
            species = np.repeat(np.arange(len(self.groups), dtype=np.int32), sizes.astype(int))
            n0 = np.array([len(origin_frames(n_frames, tau, self.origins)) for tau in lags])
            sums = sinc_sums(pos, origin_frames(n_frames, 0, self.origins), lags, species,
                             len(self.groups), self.q, self.n_threads)  # (S, L, Q)
            out.f_self = sums / (n0[None, :, None] * sizes[:, None, None])
            wts = sizes[:, None] * self._v ** 2
            out.f_self_total = np.einsum("aq,alq->lq", wts, out.f_self) / wts.sum(axis=0)
        # the per-frame rows (positions, amplitudes) were the means to these ends, and the
        # base's one-bin distance histogram (never filled) and frame index with them
        for name in (*self._frame_rows(), "frame_index", "count_uint64"):
            res.pop(name, None)
        res.update(out)

    @classmethod
    def _plot_axes(cls, results, parameters):
        from .declarations import PlotAxes

        t = np.asarray(results.times, dtype=np.float64)
        return PlotAxes(x=t, xlabel="t (ps)", ylabel="F(q, t)",
                        xlim=(float(t[0]), float(t[-1]) if t[-1] > t[0] else 1.0))

    @classmethod
    def _curves(cls, results, parameters, *, coherent=True, self_part=True):
        """For every q: the total self :math:`F_s(q, t)` (dashed in the label) and the
        total coherent :math:`F(q, t)`, over time."""
        curves = []
        for s, q in enumerate(np.asarray(results.q)):
            if self_part and "f_self_total" in results:
                curves.append(Curve(f"F$_s$, q = {q:.3g} Å$^{{-1}}$",
                                    np.asarray(results.f_self_total)[:, s]))
            if coherent and "f_total" in results:
                curves.append(Curve(f"F, q = {q:.3g} Å$^{{-1}}$",
                                    np.asarray(results.f_total)[:, s]))
        return curves

    def _output_parameters(self):
        return {"by_species": [str(s) for s in self.species],
                "weights": self.weights if isinstance(self.weights, str) else "custom",
                "origins": self.origins, "dq": self.dq,
                "self_part": self.self_part, "coherent": self.coherent}
