"""The sentence-transformers side of bench_embeddings.py and reproduce/sentence_embeddings.py.

Runs in the peer venv ($BERT_TF2_PEER_PYTHON, default .venv-reproduce/bin/python):
  python benchmarks/peer_embeddings.py MODEL_DIR SENTENCES.json

Loads `SentenceTransformer(MODEL_DIR, device="cpu")` once, then answers one JSON
command per stdin line with one JSON line on stdout (prefixed by "@@ ", so that
anything a library prints is not read as an answer):
  {"op": "info"}                                -> torch / transformers /
                                                   sentence-transformers versions, threads
  {"op": "encode", "batch_size": 32, "output": PATH or null, "count": N or null}
      -> {"seconds": wall time of model.encode(all sentences, or the first N)}; with
         an output path the float32 [N, D] vectors are saved there (np.save), outside
         the timing.
  {"op": "quit"}
Staying up between commands lets the caller interleave its own passes with ours.
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
    model_dir, sentences_path = argv[1], argv[2]
    with open(sentences_path, encoding="utf-8") as f:
        sentences = json.load(f)
    threads = os.environ.get("PEER_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    model = sentence_transformers.SentenceTransformer(model_dir, device="cpu")

    def encode(command):
        start = time.perf_counter()
        vectors = model.encode(sentences[:command.get("count") or len(sentences)],
                               batch_size=command.get("batch_size", 32),
                               convert_to_numpy=True, show_progress_bar=False)
        seconds = time.perf_counter() - start
        if command.get("output"):
            np.save(command["output"], np.asarray(vectors, np.float32))
        return {"seconds": seconds}
    peer_protocol.serve(lambda: {"torch": torch.__version__,
                                 "transformers": transformers.__version__,
                                 "sentence_transformers": sentence_transformers.__version__,
                                 "threads": torch.get_num_threads(),
                                 "max_seq_length": model.max_seq_length}, encode)


if __name__ == "__main__":
    main(sys.argv)
