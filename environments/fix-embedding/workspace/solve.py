"""Starting solution for fix-embedding: writes fixed_model.pth.

It copies the large model unchanged, scrambled embedding and all, so it
scores about 0. Replace this with your fix: recover the token embedding of
`large_model.pth` (rows permuted) using `small_model.pth` (intact, trained
on the same data), the training tokens in `train.bin`, or anything else you
can work out. Keep the architecture: the scorer loads `fixed_model.pth` into
the unchanged `model.GPT` with the large model's config.

    python3 solve.py      # then `python3 score.py` for a local check
"""

from model import load_model, save_model

model = load_model("large_model.pth")
save_model(model, "fixed_model.pth")
print("wrote fixed_model.pth (the large model, unchanged)")
