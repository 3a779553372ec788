"""`planmode.snapshots` is now `planmode.persistence.snapshots`.

This shim keeps the old import path working: it is the same module object, so imports, attributes
and mock.patch targets under the old name all reach the moved module."""

import sys

from planmode.persistence import snapshots as _snapshots
from planmode.persistence.snapshots import *  # noqa: F403  # the names type checkers see under the old path

sys.modules[__name__] = _snapshots
