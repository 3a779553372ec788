"""The thread lease's async entry points, under the path they had before the lease was one module: `arun`,
`astream`, `athread_lease` and `aassert_lease_held` are `planmode.persistence.lease`'s (one body, a sync and an
async driver; see that module's docstring)."""

from planmode.persistence.lease import aassert_lease_held, arun, astream, athread_lease
from planmode.persistence.lease import astore_for as _astore_for  # noqa: F401  # where an async saver keeps its leases

__all__ = ["aassert_lease_held", "arun", "astream", "athread_lease"]
