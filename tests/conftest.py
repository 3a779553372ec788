"""Shared test configuration.

Hypothesis profiles: ``default`` (about 200 examples per property, derandomized so the normal suite is
deterministic) and ``long`` (about 5000 examples, random seeds) for fuzzing. Select one with the
``HYPOTHESIS_PROFILE`` environment variable; the heavy property tests are marked ``slow``::

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest -q -m slow
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=200,
    deadline=None,  # plans are built and validated per example; timing varies on shared CI machines
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],  # the plan strategies build whole DAGs on purpose
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
