"""The CPU-serving peers of bench_int8.py: ONNX Runtime, OpenVINO and torch bf16 autocast.

Runs in the peer venv ($BERT_TF2_PEER_PYTHON, default .venv-reproduce/bin/python):
  python benchmarks/peer_serving.py MODEL IDS.npz THREADS WORKDIR BF16

MODEL as peer_int8.py takes it (an HF model directory, or "random:H,L,A,I"). The float
transformers.BertModel is exported once with torch.onnx.export (the TorchScript exporter,
opset 17, batch and sequence axes dynamic; no network) to WORKDIR/model.onnx, then:
  onnxruntime fp32   onnxruntime.transformers.optimizer.optimize_model(model_type="bert"):
                     attention, LayerNorm (with the residual add), GELU, bias and embedding
                     fused; the fused operator counts are in "info";
  onnxruntime int8   that fused graph through onnxruntime.quantization.quantize_dynamic
                     (int8 weights, activations quantized per call);
  openvino fp32      the plain ONNX graph read by OpenVINO, compiled for the CPU with
                     INFERENCE_PRECISION_HINT f32 (on a CPU with bf16 units OpenVINO would
                     otherwise run bf16), static shape [batch, S] per batch size, LATENCY hint;
  openvino bf16      the same with INFERENCE_PRECISION_HINT bf16 (only when BF16 is "1": the
                     CPU has avx512_bf16 or AMX);
  torch bf16         the float BertModel under torch.autocast("cpu", torch.bfloat16).
Threads pinned like the other sides: ONNX Runtime intra-op THREADS (inter-op 1), OpenVINO
INFERENCE_NUM_THREADS, torch.set_num_threads. ONNX Runtime's idle threads do not spin
(session.intra_op.allow_spinning 0) and OpenVINO does not pin its threads to cores
(ENABLE_CPU_PINNING false): on a 2-core machine shared with the other sides' processes
(and, on the developers' machines, with other work) both were faster so, e.g. ONNX Runtime
int8 MiniLM batch 1 196 vs 250-300 ms and OpenVINO fp32 417-499 vs 519-529 ms in one
interleaved run at load average 15 (2026-11-26, Intel Xeon with AMX).
IDS.npz as peer_int8.py reads it. Commands
(peer_protocol): {"op": "info"} -> versions, threads, fusions, the sides;
{"op": "run", "side": NAME, "batch": B} -> {"seconds": one forward pass of B rows};
{"op": "agreement", "ids": PATH} -> {"onnxruntime int8": [min, mean]}: the cosine of
each row's sentence vector (the last hidden states averaged over its real tokens) under
ONNX Runtime int8 with that under ONNX Runtime fp32, for the rows of PATH (an .npz as
IDS.npz), 32 at a time; {"op": "quit"}.
"""
import os
import sys
import time

import numpy as np
import torch

import agreement
import peer_int8
import peer_protocol

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17


class _Positional(torch.nn.Module):
    """The BertModel called with INPUTS by keyword (the exporter passes them by position)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    # pylint: disable-next=arguments-differ
    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output


def export_onnx(model, path):
    """WORKDIR/model.onnx of the float BertModel (last_hidden_state, pooler_output)."""
    # transformers' "eager" attention is the graph ONNX Runtime's optimizer fuses into one
    # Attention operator per layer (its default sdpa one is left unfused); torch bf16 keeps
    # the default.
    default = model.config._attn_implementation  # pylint: disable=protected-access
    model.set_attn_implementation("eager")
    example = tuple(torch.ones([2, 8], dtype=torch.int64) for _ in INPUTS)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    axes.update({"last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}})
    with torch.no_grad():
        torch.onnx.export(_Positional(model), example, path, input_names=list(INPUTS),
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    model.set_attn_implementation(default)
    return path


def onnxruntime_sides(raw, config, workdir, threads):
    """({"onnxruntime fp32": session, "onnxruntime int8": session}, fusion counts)."""
    import onnx  # pylint: disable=import-outside-toplevel
    import onnxruntime  # pylint: disable=import-outside-toplevel
    # pylint: disable-next=import-outside-toplevel
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer  # pylint: disable=import-outside-toplevel
    fused = optimizer.optimize_model(raw, model_type="bert",
                                     num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size)
    counts = {k: v for k, v in fused.get_fused_operator_statistics().items() if v}
    fused_path = os.path.join(workdir, "model_fused.onnx")
    fused.save_model_to_file(fused_path)
    int8_path = os.path.join(workdir, "model_fused_int8.onnx")
    # The fused graph's contrib operators carry no type for ONNX's shape inference: float.
    quantize_dynamic(fused_path, int8_path, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # Idle threads do not spin (see the module docstring).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sessions = {"onnxruntime fp32": onnxruntime.InferenceSession(
                    fused_path, options, providers=["CPUExecutionProvider"]),
                "onnxruntime int8": onnxruntime.InferenceSession(
                    int8_path, options, providers=["CPUExecutionProvider"])}
    return sessions, counts


def openvino_side(raw, precision, threads, batches, seq_length):
    """{batch: compiled model} of the plain ONNX graph, at `precision` ("f32" / "bf16")."""
    import openvino  # pylint: disable=import-outside-toplevel
    core = openvino.Core()
    compiled = {}
    for batch in batches:
        model = core.read_model(raw)
        model.reshape({name: [batch, seq_length] for name in INPUTS})
        compiled[batch] = core.compile_model(model, "CPU", {
            "INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "ENABLE_CPU_PINNING": False})
    return compiled


def mean_pooled(session, feeds):
    """[rows, H]: the session's last hidden states averaged over each row's real tokens."""
    hidden = session.run(None, feeds)[0]
    mask = feeds["attention_mask"][..., np.newaxis].astype(hidden.dtype)
    return (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)


def int8_agreement(sessions, path, batch=32):
    """{"onnxruntime int8": [min, mean]} of the rows' cosines with fp32 (module docstring)."""
    data = np.load(path)
    arrays = {"input_ids": data["input_ids"], "attention_mask": data["input_mask"],
              "token_type_ids": data["segment_ids"]}
    vectors = {}
    for side in ("onnxruntime fp32", "onnxruntime int8"):
        vectors[side] = np.concatenate([
            mean_pooled(sessions[side], {k: v[i:i + batch].astype(np.int64)
                                         for k, v in arrays.items()})
            for i in range(0, len(arrays["input_ids"]), batch)])
    return {"onnxruntime int8": agreement.cosine_range(vectors["onnxruntime fp32"],
                                                       vectors["onnxruntime int8"])}


def main(argv):
    """Serves the commands of the module docstring until "quit" or end of input."""
    spec, ids_path, threads, workdir, bf16 = argv[1], argv[2], int(argv[3]), argv[4], argv[5]
    torch.set_num_threads(threads)
    data = np.load(ids_path)
    arrays = {"input_ids": data["input_ids"].astype(np.int64),
              "attention_mask": data["input_mask"].astype(np.int64),
              "token_type_ids": data["segment_ids"].astype(np.int64)}
    batches = sorted({1, len(arrays["input_ids"])})
    seq_length = arrays["input_ids"].shape[1]
    model = peer_int8.hf_model(spec)
    raw = export_onnx(model, os.path.join(workdir, "model.onnx"))
    sessions, fusions = onnxruntime_sides(raw, model.config, workdir, threads)
    openvino = {"openvino fp32": openvino_side(raw, "f32", threads, batches, seq_length)}
    if bf16 == "1":
        openvino["openvino bf16"] = openvino_side(raw, "bf16", threads, batches, seq_length)

    def forward(command):
        side, rows = command["side"], command["batch"]
        feeds = {k: v[:rows] for k, v in arrays.items()}
        if side in sessions:
            start = time.perf_counter()
            sessions[side].run(None, feeds)
        elif side in openvino:
            compiled = openvino[side][rows]
            start = time.perf_counter()
            compiled(feeds)
        elif side == "torch bf16":
            tensors = {k: torch.from_numpy(v) for k, v in feeds.items()}
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                start = time.perf_counter()
                model(**tensors)
        else:
            raise ValueError("no side %r" % side)
        return {"seconds": time.perf_counter() - start}

    def info():
        import onnxruntime  # pylint: disable=import-outside-toplevel
        import openvino as ov  # pylint: disable=import-outside-toplevel
        return {"onnxruntime": onnxruntime.__version__, "openvino": ov.__version__,
                "torch": torch.__version__, "threads": threads, "fusions": fusions,
                "sides": sorted(sessions) + sorted(openvino) + ["torch bf16"]}
    def handle(command):
        if command["op"] == "agreement":
            return int8_agreement(sessions, command["ids"])
        return forward(command)
    peer_protocol.serve(info, handle)


if __name__ == "__main__":
    main(sys.argv)
