"""Validated reading of array weight files (``.npz``, ``allow_pickle=False``) for saved programs.

Used by every strategy's ``load_weights``: a missing, corrupt, pickled, mistyped, misshapen or
non-finite array is a one-line :class:`~personalign.errors.DataError` naming the file and the array.
"""

from __future__ import annotations

import os
from typing import Any

from personalign.errors import DataError


def read_npz(path: str | os.PathLike, shapes: dict[str, tuple[int, ...]], *,
             positive: tuple[str, ...] = ()) -> dict[str, Any]:
    """Arrays of an ``.npz`` weights file, validated; returns ``{name: float64 ndarray}``.

    Args:
        shapes: the expected array names and shapes (``()`` for a scalar).
        positive: names whose every value must be > 0 (e.g. a scaler's ``scale``).

    Raises:
        DataError: (naming the file and the array) missing or unreadable file, not an npz archive,
            a pickled/object array, a missing array, a non-numeric dtype, a wrong shape, NaN or
            infinity, a non-positive value where ``positive``.
    """
    import zipfile

    import numpy as np

    from personalign.data.files import check_input

    p = check_input(path, what="weights file")
    _check_headers(p, shapes)  # shapes and dtypes from the npy headers, before any array is inflated
    try:
        archive = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(p, None, None, f"not a valid .npz weights file ({type(exc).__name__})") from None
    if not hasattr(archive, "files"):
        raise DataError(p, None, None, "not an .npz archive (a single .npy array)")
    out = {}
    with archive as z:
        for name, shape in shapes.items():
            if name not in z.files:
                raise DataError(p, None, name, f"missing array (arrays present: {', '.join(z.files) or 'none'})")
            try:
                arr = z[name]
            except ValueError:
                raise DataError(p, None, name, "object (pickled) array; only numeric arrays load") from None
            except (OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
                raise DataError(p, None, name, f"unreadable array ({type(exc).__name__})") from None
            if arr.dtype.kind not in "fiu":
                raise DataError(p, None, name, f"dtype {arr.dtype} is not numeric")
            if arr.shape != tuple(shape):
                raise DataError(p, None, name, f"shape {arr.shape}, expected {tuple(shape)}")
            arr = arr.astype(np.float64)
            if not np.isfinite(arr).all():
                raise DataError(p, None, name, "contains NaN or infinity")
            if name in positive and not (arr > 0).all():
                raise DataError(p, None, name, "must be > 0 everywhere")
            out[name] = arr
    return out


def _check_headers(p, shapes: dict[str, tuple[int, ...]]) -> None:
    """Read each expected array's ``.npy`` header inside the zip (``numpy.lib.format.read_magic``,
    ``read_array_header_1_0`` / ``_2_0``) and refuse a wrong shape or a non-numeric dtype before
    the array is decompressed (a 1 MB file may hold a header promising gigabytes).

    Raises:
        DataError: not a zip archive, an unreadable header, a wrong shape or dtype (naming the array).
    """
    import zipfile

    from numpy.lib import format as npy

    if not zipfile.is_zipfile(p):
        return  # np.load names what it is (a single .npy array, garbage)
    readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    try:
        with zipfile.ZipFile(p) as zf:
            members = set(zf.namelist())
            for name, shape in shapes.items():
                member = f"{name}.npy"
                if member not in members:
                    continue  # reported as a missing array below
                with zf.open(member) as fh:
                    version = npy.read_magic(fh)
                    if version not in readers:
                        raise DataError(p, None, name, f"npy format version {version} is not supported")
                    got, _, dtype = readers[version](fh)
                if dtype.hasobject or dtype.kind not in "fiu":
                    raise DataError(p, None, name, f"dtype {dtype} is not numeric" if not dtype.hasobject
                                    else "object (pickled) array; only numeric arrays load")
                if tuple(got) != tuple(shape):
                    raise DataError(p, None, name, f"shape {tuple(got)}, expected {tuple(shape)}")
    except DataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
        raise DataError(p, None, None, f"not a valid .npz weights file ({type(exc).__name__})") from None


__all__ = ["read_npz"]
