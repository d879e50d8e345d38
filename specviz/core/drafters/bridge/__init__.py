"""Draft models with a tokenizer of their own: TLI (tli.py, the tokens both vocabularies
share) and the string bridge (string_draft.py, the draft's greedy text re-tokenized), both on
recut.py's re-cut of the context into the draft's tokens."""
