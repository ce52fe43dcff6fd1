"""Losses and metrics: label smoothing, token and sequence accuracy, corpus BLEU/chrF, CIDEr-D, BLEU by length."""
