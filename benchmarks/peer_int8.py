"""The torch side of bench_int8.py: an HF BertModel, dynamically quantized to int8.

Runs in the peer venv ($BERT_TF2_PEER_PYTHON, default .venv-reproduce/bin/python):
  python benchmarks/peer_int8.py MODEL IDS.npz THREADS

MODEL: an HF model directory (all-MiniLM-L6-v2), or "random:H,L,A,I" for a BertModel of
that shape with random weights (torch.manual_seed(0)). The model is quantized with
torch.ao.quantization.quantize_dynamic({nn.Linear}, qint8): int8 weights, activations
quantized per batch, what a torch user would pick. IDS.npz holds input_ids, input_mask,
segment_ids [N, S]; a command's batch is its first `batch` rows. One JSON command per
stdin line, one answer per stdout line prefixed "@@ ":
  {"op": "info"}                 -> torch / transformers versions, threads
  {"op": "run", "batch": B}      -> {"seconds": one forward pass of B rows}
  {"op": "quit"}
"""
import sys
import time

import numpy as np
import torch
import transformers

import peer_protocol


def hf_model(spec):
    """The float BertModel of MODEL (see the module docstring), in eval mode."""
    if spec.startswith("random:"):
        hidden, layers, heads, intermediate = (int(x) for x in spec[7:].split(","))
        torch.manual_seed(0)
        config = transformers.BertConfig(hidden_size=hidden, num_hidden_layers=layers,
                                         num_attention_heads=heads,
                                         intermediate_size=intermediate)
        return transformers.BertModel(config, add_pooling_layer=True).eval()
    return transformers.BertModel.from_pretrained(spec).eval()


def main(argv):
    """Serves the commands of the module docstring until "quit" or end of input."""
    spec, ids_path, threads = argv[1], argv[2], int(argv[3])
    torch.set_num_threads(threads)
    data = np.load(ids_path)
    tensors = {"input_ids": torch.from_numpy(data["input_ids"].astype(np.int64)),
               "attention_mask": torch.from_numpy(data["input_mask"].astype(np.int64)),
               "token_type_ids": torch.from_numpy(data["segment_ids"].astype(np.int64))}
    model = torch.ao.quantization.quantize_dynamic(hf_model(spec), {torch.nn.Linear},
                                                   dtype=torch.qint8)
    def forward(command):
        batch = {k: v[:command["batch"]] for k, v in tensors.items()}
        with torch.inference_mode():
            start = time.perf_counter()
            model(**batch)
            return {"seconds": time.perf_counter() - start}
    peer_protocol.serve(lambda: {"torch": torch.__version__,
                                 "transformers": transformers.__version__,
                                 "threads": torch.get_num_threads()}, forward)


if __name__ == "__main__":
    main(sys.argv)
