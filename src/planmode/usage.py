"""`planmode.usage` is now `planmode.observability.usage`.

This shim keeps the old import path working: it is the same module object, so imports, attributes
and mock.patch targets under the old name all reach the moved module."""

import sys

from planmode.observability import usage as _usage
from planmode.observability.usage import *  # noqa: F403  # the names type checkers see under the old path

sys.modules[__name__] = _usage
