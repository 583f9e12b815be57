"""The sentence-transformers side of bench_ranker.py: CrossEncoder.predict on (query, passage)
pairs.

Runs in the peer venv ($BERT_TF2_PEER_PYTHON, default .venv-reproduce/bin/python):
  python benchmarks/peer_ranker.py HF_DIR PAIRS.json MAX_LENGTH

Loads `CrossEncoder(HF_DIR, max_length=MAX_LENGTH, device="cpu")` once (HF_DIR: our
convert_hf_checkpoint.py --direction=to_hf export of a run_ranker folder,
BertForSequenceClassification with one label), then answers one JSON command per stdin line
with one JSON line on stdout (prefixed by "@@ ": peer_protocol.py):
  {"op": "info"}                                -> torch / transformers /
                                                   sentence-transformers versions, threads
  {"op": "score", "batch_size": 32, "output": PATH or null, "count": N or null}
      -> {"seconds": wall time of model.predict(all pairs, or the first N)}, the raw
         logits (activation_fn=Identity: run_ranker's scores, not CrossEncoder's default
         sigmoid of them); with an output path the float32 [N] scores are saved there
         (np.save), outside the timing.
  {"op": "quit"}
"""
import json
import os
import sys
import time

import numpy as np
import sentence_transformers
import torch
import transformers

import peer_protocol


def main(argv):
    """Serves the commands of the module docstring until "quit" or end of input."""
    hf_dir, pairs_path, max_length = argv[1], argv[2], int(argv[3])
    with open(pairs_path, encoding="utf-8") as f:
        pairs = [tuple(pair) for pair in json.load(f)]
    threads = os.environ.get("PEER_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    model = sentence_transformers.CrossEncoder(hf_dir, max_length=max_length, device="cpu")
    identity = torch.nn.Identity()

    def score(command):
        start = time.perf_counter()
        scores = model.predict(pairs[:command.get("count") or len(pairs)],
                               batch_size=command.get("batch_size", 32),
                               activation_fn=identity, convert_to_numpy=True,
                               show_progress_bar=False)
        seconds = time.perf_counter() - start
        if command.get("output"):
            np.save(command["output"], np.asarray(scores, np.float32).reshape([-1]))
        return {"seconds": seconds}
    peer_protocol.serve(lambda: {"torch": torch.__version__,
                                 "transformers": transformers.__version__,
                                 "sentence_transformers": sentence_transformers.__version__,
                                 "threads": torch.get_num_threads()}, score)


if __name__ == "__main__":
    main(sys.argv)
