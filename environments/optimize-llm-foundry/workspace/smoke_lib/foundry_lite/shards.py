"""MDS-like token shards (the smoke stand-in for mosaicml-streaming's MDS
format): a split folder holds index.json and shard.NNNNN.jsonl files, one
JSON sample per line: {"input_ids": [prompt ids], "labels": [response ids]}.
"""

import json
import os

INDEX = "index.json"


def write_split(folder, samples, samples_per_shard, meta):
    os.makedirs(folder, exist_ok=True)
    shards = []
    for start in range(0, len(samples), samples_per_shard):
        name = f"shard.{len(shards):05d}.jsonl"
        with open(os.path.join(folder, name), "w") as f:
            for sample in samples[start : start + samples_per_shard]:
                f.write(json.dumps(sample) + "\n")
        shards.append({"file": name, "samples": len(samples[start : start + samples_per_shard])})
    with open(os.path.join(folder, INDEX), "w") as f:
        json.dump({"version": 1, "shards": shards, "meta": meta}, f, indent=1)
        f.write("\n")


def read_index(folder):
    with open(os.path.join(folder, INDEX)) as f:
        return json.load(f)


class ShardReader:
    """Random access to the samples of a split, reading its shard files on
    demand (one line at a time: the files are re-read on every access)."""

    def __init__(self, folder):
        self.folder = folder
        index = read_index(folder)
        self.locations = []
        for shard in index["shards"]:
            for row in range(shard["samples"]):
                self.locations.append((shard["file"], row))

    def __len__(self):
        return len(self.locations)

    def __getitem__(self, i):
        name, row = self.locations[i]
        with open(os.path.join(self.folder, name)) as f:
            for j, line in enumerate(f):
                if j == row:
                    return json.loads(line)
        raise IndexError(i)
