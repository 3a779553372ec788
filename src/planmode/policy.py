"""`planmode.policy` is now `planmode.approval.policy`.

Importing the old path warns (`DeprecationWarning`); it goes in the next minor version (0.2.0). Until then
this shim keeps the old import path working: it is the same module object, so imports, attributes
and mock.patch targets under the old name all reach the moved module."""

import sys
import warnings

from planmode.approval import policy as _policy
from planmode.approval.policy import *  # noqa: F403  # the names type checkers see under the old path

warnings.warn(
    "planmode.policy is deprecated and goes in planmode 0.2.0: import planmode.approval.policy instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _policy
