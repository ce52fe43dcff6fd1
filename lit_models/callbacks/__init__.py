"""Lightning callbacks: the probes an ablation measures with, the attention figures, the prediction writer."""
