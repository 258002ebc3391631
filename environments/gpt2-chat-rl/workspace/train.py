"""The starting solution: no training at all.

Writes final_model.pth as an unchanged copy of the pretrained base model
(prepare already put this very copy in the workspace). Replace this with
your own training: reinforcement learning or preference optimization
against the judge (judge.py) on the training prompts (train_prompts.txt).

    python3 train.py
"""

from model import load_model, save_model

save_model(load_model("base_model.pth"), "final_model.pth")
print("wrote final_model.pth (the base model, unchanged)")
