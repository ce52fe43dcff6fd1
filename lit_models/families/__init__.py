"""The LightningModules, one module per family: what ``--model`` names (``attnlab fit --model TransformerSeq2Seq``)."""
