"""Unpickling data files without running code: numpy arrays, lists, dicts and strings only.

The published traffic datasets ship as pickles (PVCGN's HZMetro windows, DCRNN's ``adj_mx.pkl``),
and a pickle can run any code when loaded. Since ``--dataset PATH`` may come from a run's
configuration (the server's, for a client), every pickle is read through this unpickler, which
refuses every global but numpy's array rebuilder (defence in depth beside the checksums).
"""

from __future__ import annotations

import io
import pickle

import numpy as np

_RECONSTRUCT = np.ndarray.__reduce__(np.empty(0))[0]  # numpy's array rebuilder, whatever module it lives in
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class ArraysOnly(pickle.Unpickler):
    """An unpickler that builds numpy arrays, lists, dicts and strings and refuses every other global.

    Mapping ``numpy.core`` to the running numpy's own function also avoids numpy 2's warning."""

    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only numpy arrays are expected") from None


def load_arrays(blob: bytes, *, encoding: str = "ASCII"):
    """Unpickle ``blob`` with :class:`ArraysOnly` (``encoding="latin1"`` for DCRNN's Python 2 pickles).

    Raises:
        pickle.UnpicklingError: the pickle names anything but numpy's array pieces.
    """
    return ArraysOnly(io.BytesIO(blob), encoding=encoding).load()
