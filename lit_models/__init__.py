"""The models: plain-torch blocks, the axis wiring (axes, registries, specs, builders) at the root, and the
families, training pieces, training policies, callbacks and metrics in their subpackages."""

from lit_models import moved

moved.install()  # saved configs and checkpoints name modules by their paths before the subpackages
