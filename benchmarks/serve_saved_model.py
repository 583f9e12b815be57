"""Our SavedModel served as a serving process runs it, for bench_int8.py.

  python benchmarks/serve_saved_model.py EXPORT_DIR IDS.npz

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
  {"op": "quit"}
"""
import os
import sys

import numpy as np

import bench_int8
from bench_util import tf
import peer_protocol


def main(argv):
    """Serves the commands of the module docstring until "quit" or end of input."""
    export_dir, ids_path = argv[1], argv[2]
    data = np.load(ids_path)
    # `loaded` holds the variables the signature reads while this frame serves.
    saved, loaded = bench_int8.saved_model_side(  # pylint: disable=unused-variable
        export_dir, {k: data[k] for k in ("input_ids", "input_mask", "segment_ids")})
    peer_protocol.serve(lambda: {
        "tensorflow": tf.__version__,
        "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": os.environ.get("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"),
        "threads": os.environ.get("TF_NUM_INTRAOP_THREADS")},
        lambda command: {"seconds": saved(command["batch"])})


if __name__ == "__main__":
    main(sys.argv)
