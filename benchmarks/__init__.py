"""attnlab speed and memory benchmarks against the implementations users would pick instead.

Not part of the test suite (``testpaths = ["tests"]``). Run everything with::

    python -m benchmarks run --out benchmarks/results/cpu.json

``--quick`` runs every section on tiny sizes in seconds (a smoke test of this code, not a
measurement). See ``BENCHMARKS.md`` at the repository root for the latest table.
"""
