"""attnlab_run: the command machinery beside the models.

The Lightning CLI (``cli``), the run directory (``rundir``) and what a command records in it
(``recording``, ``wandb_run``), the checks on the command line before anything is created
(``guards``, ``inputs``, ``conventions``), fault tolerance (``faults``, ``preemption``,
``fault_injection``), the environment record and optional trainer callbacks (``compile``).

It sits above ``lit_models`` and ``datamodules`` (the models never import it) and below
``ablations`` and the ``attnlab`` command table.
"""

from attnlab_run.cachedirs import route_library_caches

route_library_caches()  # before torch and matplotlib are imported: they read these variables then
