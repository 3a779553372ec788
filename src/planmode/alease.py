"""`planmode.alease` is now `planmode.persistence.alease`.

This shim keeps the old import path working: it is the same module object, so imports, attributes
and mock.patch targets under the old name all reach the moved module."""

import sys

from planmode.persistence import alease as _alease
from planmode.persistence.alease import *  # noqa: F403  # the names type checkers see under the old path

sys.modules[__name__] = _alease
