"""The engine's options checked: each a clear error naming the option and its values."""

from __future__ import annotations

import numbers

from . import _fastrdf_cpu as _cpu

__all__ = ["validate_cell_order", "validate_cells_per_cutoff", "validate_kernel",
           "validate_method", "validate_n_threads", "validate_precision"]

_METHODS = tuple(_cpu.METHODS)
_CELL_ORDERS = tuple(_cpu.CELL_ORDERS)
_MAX_CELLS_PER_CUTOFF = _cpu.MAX_CELL_K
# the CUDA all-pairs kernels (kernel=...): the CPU module exports the same table as the CUDA
# module's KERNELS, so that a build without CUDA checks the option alike
_KERNELS = tuple(_cpu.CUDA_KERNELS)
_PRECISIONS = ("single", "double")


def _choices(names) -> str:
    """``'a', 'b' or 'c'``"""
    quoted = [repr(n) for n in names]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]



def validate_precision(precision) -> str:
    if precision not in _PRECISIONS:
        raise ValueError(f"precision must be 'single' or 'double', got {precision!r}")
    return precision


def validate_method(method) -> str:
    """Check ``method`` ('auto', 'allpairs' or 'cells')."""
    if not isinstance(method, str) or method.lower() not in _METHODS:
        raise ValueError(
            f"method must be {_choices(_METHODS)} ('auto': cell lists when they are expected "
            f"to be faster), got {method!r}"
        )
    return method.lower()


def validate_cells_per_cutoff(cells_per_cutoff):
    """Check ``cells_per_cutoff`` (an integer from 1 to 8, or None) and return it as int."""
    if cells_per_cutoff is None:
        return None
    if (isinstance(cells_per_cutoff, bool) or not isinstance(cells_per_cutoff, numbers.Integral)
            or not 1 <= cells_per_cutoff <= _MAX_CELLS_PER_CUTOFF):
        raise ValueError(
            f"cells_per_cutoff must be an integer from 1 to {_MAX_CELLS_PER_CUTOFF} or None, "
            f"got {cells_per_cutoff!r}"
        )
    return int(cells_per_cutoff)


def validate_cell_order(cell_order) -> str:
    """Check ``cell_order`` ('rowmajor', 'morton' or 'hilbert')."""
    if cell_order not in _CELL_ORDERS:
        raise ValueError(f"cell_order must be {_choices(_CELL_ORDERS)}, got {cell_order!r}")
    return cell_order


def validate_kernel(kernel) -> str:
    """Check ``kernel`` ('auto', 'shared', 'packed' or 'global')."""
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be {_choices(_KERNELS)}, got {kernel!r}")
    return kernel


def validate_n_threads(n_threads):
    if n_threads is None:
        return None
    if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral):
        raise TypeError(f"n_threads must be a positive integer or None, got {n_threads!r}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1 (or None for all cores), got {n_threads}")
    return int(n_threads)
