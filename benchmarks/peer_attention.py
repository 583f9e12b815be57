"""The torch side of bench_attention.py: torch's scaled_dot_product_attention on CPU.

Runs in the peer venv ($BERT_TF2_PEER_PYTHON, default .venv-reproduce/bin/python):
  python benchmarks/peer_attention.py THREADS

One JSON command per stdin line, one answer per stdout line prefixed "@@ ":
  {"op": "info"}                                  -> torch version, threads
  {"op": "run", "shape": [B, N, S, D], "calls": C} -> {"seconds": C calls of SDPA}
  {"op": "quit"}
The inputs are bench_attention.py's (numpy RandomState(0) draws of q, k, v; the last
eighth of every row's keys masked), the mask additive as transformers builds it (the
float32 minimum on masked keys), the output transposed to [B, S, N, D] and made
contiguous as BertSelfAttention does.
"""
import sys
import time

import numpy as np
import torch

import peer_protocol


def _inputs(shape):
    batch, _, length, _ = shape
    rng = np.random.RandomState(0)
    q, k, v = (torch.from_numpy(rng.randn(*shape).astype(np.float32)) for _ in range(3))
    keep = torch.ones(batch, length)
    keep[:, length - length // 8:] = 0
    mask = ((1.0 - keep) * torch.finfo(torch.float32).min)[:, None, None, :]
    return q, k, v, mask


def main(argv):
    """Serves the commands of the module docstring until "quit" or end of input."""
    torch.set_num_threads(int(argv[1]))
    cache = {}

    def attend(command):
        shape = tuple(command["shape"])
        if shape not in cache:
            cache.clear()
            cache[shape] = _inputs(shape)
        q, k, v, mask = cache[shape]
        with torch.inference_mode():
            start = time.perf_counter()
            for _ in range(command["calls"]):
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                out.transpose(1, 2).contiguous()
            return {"seconds": time.perf_counter() - start}
    peer_protocol.serve(lambda: {"torch": torch.__version__,
                                 "threads": torch.get_num_threads()}, attend)


if __name__ == "__main__":
    main(sys.argv)
