"""What the families share to train and evaluate: the base modules, the optimiser, REINFORCE, stacked seeds."""
