"""The peers of bench_runtime_doors.py: what a user runs instead of our OpenVINO and ONNX
Runtime doors, Hugging Face's optimum-intel and optimum (ONNX Runtime), text in.

Runs in its own pinned venv ($BERT_TF2_OPTIMUM_PYTHON, default .venv-optimum/bin/python,
made by `make bench` from benchmarks/requirements-optimum.txt): optimum-intel and
optimum-onnx need transformers < 4.58, the main peer venv has 5.x.
  python benchmarks/peer_optimum.py HF_DIR TEXTS.json THREADS WORKDIR SIDES

HF_DIR: our model written as a transformers folder (convert_hf_checkpoint.py
--direction=to_hf: config, weights, vocab and tokenizer files), the same weights as our
export. TEXTS.json: {"texts": [...], "calibration": [...]}; a call of batch B encodes the
first B texts. SIDES: comma-separated among
  openvino:fp32  OVModelForFeatureExtraction exported from HF_DIR (optimum-intel's own
                 torch -> OpenVINO export), compiled with INFERENCE_PRECISION_HINT f32;
  openvino:bf16  the same IR compiled with INFERENCE_PRECISION_HINT bf16;
  openvino:int8  OVQuantizer's full int8 (OVQuantizationConfig: NNCF post-training
                 quantization, activations and weights) calibrated on the "calibration"
                 texts tokenized by the HF tokenizer;
  onnx:fp32      ORTModelForFeatureExtraction exported from HF_DIR (optimum's ONNX export);
  onnx:int8      that ONNX file through ORTQuantizer, dynamic int8
                 (AutoQuantizationConfig.avx512_vnni where the CPU has VNNI, else avx2).
Every side is what optimum's documentation shows: AutoTokenizer (the fast tokenizer;
padding to the batch's longest, truncation at the export's max_seq_length) -> the model ->
the last hidden states mean-pooled over the real tokens and L2-normalised (what
sentence-transformers does for all-MiniLM-L6-v2): the sentence vectors our encoder door
returns. Threads pinned as the other sides: OpenVINO INFERENCE_NUM_THREADS, ONNX Runtime
intra-op THREADS (inter-op 1, idle threads not spinning, as peer_serving.py's).

A side that fails to build is left out, its error in "info" ("failed"), the others served.
Commands (peer_protocol): {"op": "info"} -> versions, threads, the sides, the failed ones;
{"op": "run", "side": NAME, "batch": B} -> {"seconds": tokenize + model + pooling of B
texts}; {"op": "vectors", "side": NAME, "count": N} -> {"vectors": [[...]]} of the first N
texts; {"op": "quit"}.
"""
import json
import os
import sys
import time

import numpy as np

import peer_protocol

SIDES = ("openvino:fp32", "openvino:bf16", "openvino:int8", "onnx:fp32", "onnx:int8")
PRECISION = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}


def parse_sides(text):
    """"openvino:fp32,onnx:int8" -> the tuple of sides (ValueError naming an unknown one)."""
    sides = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in sides if s not in SIDES]
    if unknown or not sides:
        raise ValueError("SIDES must be among %s, got %r" % (", ".join(SIDES), text))
    return sides


def ov_config(precision, threads):
    """The OpenVINO compile settings of one side (the threads pinned as ours)."""
    return {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": str(threads),
            "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": "NO", "CACHE_DIR": ""}


def sentence_vectors(hidden, mask):
    """[N, H] mean of `hidden` [N, S, H] over the rows' real tokens, L2-normalised."""
    hidden = np.asarray(hidden, np.float32)
    weights = mask[..., np.newaxis].astype(np.float32)
    mean = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


def build_side(models, failed, side, build):
    """models[side] = build(), or failed[side] = the one-line error when it raises (the
    other sides still run; the bench's rows for this one then say a side did not run)."""
    try:
        models[side] = build()
    except Exception as e:  # pylint: disable=broad-except
        failed[side] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def _openvino_models(hf_dir, workdir, variants, threads, calibration, tokenizer, length):
    """({"openvino:<variant>": OVModelForFeatureExtraction}, {side: error}) of the openvino
    sides asked for."""
    from optimum.intel import OVModelForFeatureExtraction  # pylint: disable=import-outside-toplevel
    exported = os.path.join(workdir, "optimum_openvino")
    models, failed = {}, {}
    try:
        OVModelForFeatureExtraction.from_pretrained(hf_dir, export=True,
                                                    compile=False).save_pretrained(exported)
    except Exception as e:  # pylint: disable=broad-except
        return {}, {"openvino:" + v: "export: %s: %s" % (type(e).__name__, e) for v in variants}
    for variant in variants:
        if variant == "int8":
            build = lambda: _openvino_int8(exported, workdir, threads, calibration,  # noqa: E731
                                           tokenizer, length)
        else:
            build = lambda v=variant: OVModelForFeatureExtraction.from_pretrained(  # noqa: E731
                exported, ov_config=ov_config(PRECISION[v], threads))
        build_side(models, failed, "openvino:" + variant, build)
    return models, failed


def _openvino_int8(exported, workdir, threads, calibration, tokenizer, length):
    """OVQuantizer's full int8 of the exported IR, calibrated on `calibration` texts."""
    # pylint: disable-next=import-outside-toplevel
    from optimum.intel import (OVConfig, OVModelForFeatureExtraction, OVQuantizationConfig,
                               OVQuantizer)
    import nncf  # pylint: disable=import-outside-toplevel
    model = OVModelForFeatureExtraction.from_pretrained(exported, compile=False)
    encoded = [dict(tokenizer([text], padding=True, truncation=True, max_length=length,
                              return_tensors="np")) for text in calibration]
    out = os.path.join(workdir, "optimum_openvino_int8")
    quantizer = OVQuantizer.from_pretrained(model)
    quantizer.quantize(calibration_dataset=nncf.Dataset(encoded), save_directory=out,
                       ov_config=OVConfig(quantization_config=OVQuantizationConfig(
                           num_samples=len(encoded))))
    return OVModelForFeatureExtraction.from_pretrained(
        out, ov_config=ov_config("f32", threads))


def _onnx_models(hf_dir, workdir, variants, threads, flags):
    """({"onnx:<variant>": ORTModelForFeatureExtraction}, {side: error}) of the onnx sides
    asked for."""
    import onnxruntime  # pylint: disable=import-outside-toplevel
    # pylint: disable-next=import-outside-toplevel
    from optimum.onnxruntime import ORTModelForFeatureExtraction, ORTQuantizer
    # pylint: disable-next=import-outside-toplevel
    from optimum.onnxruntime.configuration import AutoQuantizationConfig
    exported = os.path.join(workdir, "optimum_onnx")
    try:
        ORTModelForFeatureExtraction.from_pretrained(hf_dir, export=True).save_pretrained(
            exported)
    except Exception as e:  # pylint: disable=broad-except
        return {}, {"onnx:" + v: "export: %s: %s" % (type(e).__name__, e) for v in variants}
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")

    def build(variant):
        folder, file_name = exported, "model.onnx"
        if variant == "int8":
            vnni = bool({"avx512_vnni", "avx_vnni"} & flags)
            config = (AutoQuantizationConfig.avx512_vnni if vnni else AutoQuantizationConfig.avx2)(
                is_static=False, per_channel=False)
            folder = os.path.join(workdir, "optimum_onnx_int8")
            ORTQuantizer.from_pretrained(exported).quantize(save_dir=folder,
                                                            quantization_config=config)
            file_name = "model_quantized.onnx"
        return ORTModelForFeatureExtraction.from_pretrained(
            folder, file_name=file_name, session_options=options)
    models, failed = {}, {}
    for variant in variants:
        build_side(models, failed, "onnx:" + variant, lambda v=variant: build(v))
    return models, failed


def _cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def main(argv):
    """Serves the commands of the module docstring until "quit" or end of input."""
    hf_dir, texts_path, threads, workdir = argv[1], argv[2], int(argv[3]), argv[4]
    sides = parse_sides(argv[5])
    import torch  # pylint: disable=import-outside-toplevel
    from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(threads)
    with open(texts_path, encoding="utf-8") as f:
        data = json.load(f)
    texts = data["texts"]
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        length = min(int(data.get("max_seq_length", 128)),
                     json.load(f).get("max_position_embeddings", 512))
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    models, failed = {}, {}
    ov = [s.split(":")[1] for s in sides if s.startswith("openvino:")]
    onnx = [s.split(":")[1] for s in sides if s.startswith("onnx:")]
    for made in ((_openvino_models(hf_dir, workdir, ov, threads,
                                   data.get("calibration") or texts[:32], tokenizer, length)
                  if ov else ({}, {})),
                 _onnx_models(hf_dir, workdir, onnx, threads, _cpu_flags()) if onnx
                 else ({}, {})):
        models.update(made[0])
        failed.update(made[1])

    def encode(side, count):
        batch = tokenizer(texts[:count], padding=True, truncation=True, max_length=length,
                          return_tensors="np")
        hidden = models[side](**batch).last_hidden_state
        return sentence_vectors(hidden, batch["attention_mask"])

    def handle(command):
        if command["side"] not in models:
            raise ValueError("no side %r" % command["side"])
        if command["op"] == "vectors":
            return {"vectors": encode(command["side"], command["count"]).tolist()}
        start = time.perf_counter()
        encode(command["side"], command["batch"])
        return {"seconds": time.perf_counter() - start}

    def info():
        import importlib.metadata as metadata  # pylint: disable=import-outside-toplevel
        versions = {}
        for name in ("optimum-intel", "optimum-onnx", "optimum", "openvino", "onnxruntime",
                     "transformers", "torch", "nncf"):
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                pass
        return {"versions": versions, "threads": threads, "sides": sorted(models),
                "failed": failed, "max_seq_length": length}
    peer_protocol.serve(info, handle)


if __name__ == "__main__":
    main(sys.argv)
