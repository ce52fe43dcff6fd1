"""The sweep engine: sweep files, trial processes and their states, warm interpreters, seed stacking groups.
Imports nothing else of ``ablations``."""
