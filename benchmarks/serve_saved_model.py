"""Our SavedModel served as a serving process runs it, for bench_int8.py.

  python benchmarks/serve_saved_model.py EXPORT_DIR IDS.npz [TEXTS.json]

Started by bench_int8.py (bench_util.PeerProcess, our own venv) with the environment of a
process that only serves: TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS pinned as in the
bench's own process and TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1, which lets TensorFlow's oneDNN
matmuls keep their weights in the layout their fastest kernels read (on a CPU with AMX:
the bf16 tile kernels) instead of reordering them at every call. That is only right where
no variable changes after a matmul first ran, so it is a setting for a process that only
serves, never for the bench's own process (which builds, loads and exports models) nor
for the runners. IDS.npz holds input_ids, input_mask, segment_ids [N, S]; a command's
batch is its first `batch` rows. One JSON command per stdin line (peer_protocol):
  {"op": "info"}                 -> the TensorFlow version and the setting
  {"op": "run", "batch": B}      -> {"seconds": one serving_ids call of B rows}
  {"op": "embed", "batch": B}    -> {"seconds": one call of an encoder export's `embed`
                                    signature (text in) on the first B texts of TEXTS.json
                                    (bench_runtime_doors.py: {"texts": [...]})}
  {"op": "vectors", "count": N}  -> {"vectors": [[...]]}: `embed` of the first N texts
  {"op": "quit"}
"""
import json
import os
import sys
import time

import numpy as np

import bench_int8
from bench_util import tf
import peer_protocol


def main(argv):
    """Serves the commands of the module docstring until "quit" or end of input."""
    export_dir, ids_path = argv[1], argv[2]
    data = np.load(ids_path)
    # `loaded` holds the variables the signature reads while this frame serves.
    saved, loaded = bench_int8.saved_model_side(
        export_dir, {k: data[k] for k in ("input_ids", "input_mask", "segment_ids")})
    texts = []
    if len(argv) > 3:
        with open(argv[3], encoding="utf-8") as f:
            texts = json.load(f)["texts"]

    def embed(count):
        return loaded.embed(tf.constant(texts[:count]))["sentence_embedding"].numpy()

    def handle(command):
        if command["op"] == "embed":
            start = time.perf_counter()
            embed(command["batch"])
            return {"seconds": time.perf_counter() - start}
        if command["op"] == "vectors":
            return {"vectors": embed(command["count"]).tolist()}
        return {"seconds": saved(command["batch"])}
    peer_protocol.serve(lambda: {
        "tensorflow": tf.__version__,
        "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": os.environ.get("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"),
        "threads": os.environ.get("TF_NUM_INTRAOP_THREADS")}, handle)


if __name__ == "__main__":
    main(sys.argv)
