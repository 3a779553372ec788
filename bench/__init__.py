"""planmode benchmarks: planmode and three baselines on the same seeded scenarios and the same scripted model.

Run everything with ``python -m bench`` (``--quick`` for tiny sizes); results land in ``bench/results/``.
"""
