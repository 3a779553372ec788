"""`planmode.snapshots` is now `planmode.persistence.snapshots`.

Importing the old path warns (`DeprecationWarning`); it goes in the next minor version (0.2.0). Until then
this shim keeps the old import path working: it is the same module object, so imports, attributes
and mock.patch targets under the old name all reach the moved module."""

import sys
import warnings

from planmode.persistence import snapshots as _snapshots
from planmode.persistence.snapshots import *  # noqa: F403  # the names type checkers see under the old path

warnings.warn(
    "planmode.snapshots is deprecated and goes in planmode 0.2.0: import planmode.persistence.snapshots instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _snapshots
