"""Special token ids shared by every vocabulary, tokenizer, batch and decoder: PAD=0, BOS=1, EOS=2, UNK=3."""

PAD, BOS, EOS, UNK = 0, 1, 2, 3
