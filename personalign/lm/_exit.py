"""Interpreter exit without llama-cpp-python's "unclosed file" warnings.

llama-cpp-python opens two ``/dev/null`` files at import (its output suppression) and never closes
them. At exit Python checks them against the filter list the C side of :mod:`warnings` saw last; after
a warning issued inside ``catch_warnings`` with "always" (compare does that around compile), that is
the context's copy, and the demo printed ``ResourceWarning: unclosed file`` twice. One ignored warning
issued at exit makes the C side read the real list (ResourceWarning ignored, Python's default) first.
"""

from __future__ import annotations

import atexit
import warnings
from functools import lru_cache


def _refresh_warning_filters() -> None:
    warnings.filterwarnings("ignore", message="personalign: refresh", category=ResourceWarning)
    warnings.warn("personalign: refresh", ResourceWarning, stacklevel=1)


@lru_cache(maxsize=None)  # registered once
def quiet_exit() -> None:
    """Register the exit-time refresh (idempotent)."""
    atexit.register(_refresh_warning_filters)
