"""The torch side of profile_ops.py: HF BertModel's forward, timed and split into op classes
(run in the peer venv).

Usage (profile_ops.py writes the job file and runs this):
  .venv-reproduce/bin/python benchmarks/peer_profile_ops.py JOB.json RESULT.json

JOB.json: {"config": a BertConfig dict, "attention": "eager" | "sdpa", "input_ids",
"attention_mask", "token_type_ids": [B, S] lists (the ids ours ran), "repeats": R,
"time_budget": T}. The model is randomly initialised, in eval mode under
torch.inference_mode (as HF's pipelines run it). One untimed forward, then R timed ones
(fewer when R would take over T seconds; the median is the result), then one under
torch.profiler: every aten op's self CPU time is put in the class of the
module it ran in (labels pushed by forward hooks: query/key/value, attention output,
FFN, GELU, LayerNorm, embeddings, self-attention) and, inside the self-attention, by
what it is (the first matmul of a call the scores, the second the context; softmax; the
mask add and scale; the fused scaled_dot_product_attention kernel).
RESULT.json: {"seconds": median wall seconds per forward, "classes": {class: ms per
forward}, "threads": torch.get_num_threads(), "config": torch.__config__ lines about
the BLAS / oneDNN / MKL it was built with, "versions"}.
"""
import json
import statistics
import sys
import time

import torch
import transformers

_PREFIX = "cls::"
_ATTENTION_OPS = {"aten::softmax": "softmax", "aten::_softmax": "softmax",
                  "aten::add": "mask add / scale", "aten::add_": "mask add / scale",
                  "aten::mul": "mask add / scale", "aten::div": "mask add / scale",
                  "aten::_scaled_dot_product_flash_attention_for_cpu": "fused attention (SDPA)",
                  "aten::_scaled_dot_product_attention_math": "fused attention (SDPA)"}
_MATMUL_OPS = ("aten::bmm", "aten::mm", "aten::addmm", "aten::baddbmm")


def _label_modules(model):
    """Forward hooks that open a profiler range "cls::<class>" around each labelled module."""
    labels = {}
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("query", "key", "value"):
            labels[module] = "QKV matmul"
        elif name.endswith("attention.output.dense"):
            labels[module] = "attention-output matmul"
        elif name.endswith("intermediate.dense") or (name.endswith("output.dense")
                                                      and "attention" not in name):
            labels[module] = "FFN matmuls"
        elif leaf == "intermediate_act_fn":
            labels[module] = "GELU"
        elif leaf == "LayerNorm":
            labels[module] = "LayerNorm"
        elif leaf == "embeddings":
            labels[module] = "gathers / embeddings"
        elif name.endswith("attention.self"):
            labels[module] = "attention"
    for module, label in labels.items():
        ranges = []

        def enter(_, __, label=label, ranges=ranges):
            ranges.append(torch.profiler.record_function(_PREFIX + label))
            ranges[-1].__enter__()

        def leave(_, __, ___, ranges=ranges):
            ranges.pop().__exit__(None, None, None)
        module.register_forward_pre_hook(enter)
        module.register_forward_hook(leave)


def _label_of(event):
    """The innermost "cls::" range around a profiler event (None outside every one)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(_PREFIX):
            return parent, parent.name[len(_PREFIX):]
        parent = parent.cpu_parent
    return None, None


def split_classes(events, forwards):
    """{class: ms per forward} of the profiled aten ops' self CPU time."""
    classes = {}
    matmuls_seen = {}
    for event in sorted(events, key=lambda e: e.time_range.start):
        if event.name.startswith(_PREFIX) or not event.name.startswith("aten::"):
            continue
        scope, label = _label_of(event)
        name = label or "other"
        if label == "attention":
            if event.name in _MATMUL_OPS:
                count = matmuls_seen.get(id(scope), 0)
                matmuls_seen[id(scope)] = count + 1
                name = "scores batch-matmul" if count % 2 == 0 else "context batch-matmul"
            else:
                name = _ATTENTION_OPS.get(event.name, "other")
        classes[name] = classes.get(name, 0.0) + event.self_cpu_time_total / 1e3 / forwards
    return classes


def _build_info():
    """The lines of torch.__config__.show() naming its BLAS, LAPACK, MKL and oneDNN."""
    lines = [line.strip(" -") for line in torch.__config__.show().splitlines()]
    keep = [line for line in lines if any(k in line for k in (
        "Intel(R) oneAPI Math Kernel", "Intel(R) MKL", "oneDNN", "MKL-DNN", "CPU capability"))]
    settings = [s.strip() for line in lines if line.startswith("Build settings")
                for s in line.split(",") if s.strip().startswith(("BLAS_INFO", "USE_MKLDNN"))]
    keep += settings
    keep.append("torch.backends.mkldnn.is_available(): %s; torch.backends.mkl.is_available(): %s"
                % (torch.backends.mkldnn.is_available(), torch.backends.mkl.is_available()))
    return keep


def run(job):
    """The RESULT.json dict of one job (module docstring)."""
    config = transformers.BertConfig(**job["config"], attn_implementation=job["attention"])
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    inputs = {k: torch.tensor(job[k]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    times = []
    with torch.inference_mode():
        start = time.perf_counter()
        model(**inputs)
        first = time.perf_counter() - start
        budget = job.get("time_budget", 30.0)
        for _ in range(max(1, min(job["repeats"], int(budget / max(first, 1e-6))))):
            start = time.perf_counter()
            model(**inputs)
            times.append(time.perf_counter() - start)
        _label_modules(model)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            model(**inputs)
    return {"seconds": statistics.median(times), "classes": split_classes(prof.events(), 1),
            "threads": torch.get_num_threads(), "config": _build_info(),
            "versions": "torch %s, transformers %s" % (torch.__version__,
                                                       transformers.__version__)}


def main(argv):
    """Reads JOB.json, writes RESULT.json."""
    with open(argv[1], encoding="utf-8") as f:
        job = json.load(f)
    result = run(job)
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv)
