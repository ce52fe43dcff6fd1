"""The bottom layer every other package may import: special token ids, the user-error type, the atomic writer.

It imports nothing from ``lit_models``, ``datamodules`` or ``ablations``.
"""
