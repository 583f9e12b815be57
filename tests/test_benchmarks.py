"""The benchmark scripts work (tiny models, no timing assertions) and count FLOPs right."""
import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from bert_tf2 import machine
from conftest import REPO_ROOT

sys.path.insert(1, os.path.join(str(REPO_ROOT), "benchmarks"))

import bench_util  # noqa: E402  pylint: disable=wrong-import-position
import run_all  # noqa: E402  pylint: disable=wrong-import-position
import write_readme  # noqa: E402  pylint: disable=wrong-import-position

SCHEMA = {"measure", "config", "ours", "peer", "unit", "ratio", "against"}


@pytest.fixture
def main_of_run_all():
    """run_all.main, with the process's log levels put back afterwards: it quiets
    TensorFlow's logger and absl for its run, and the tests after it in this process
    (test_tf1_estimator's) read INFO lines."""
    from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
    tf_logger = logging.getLogger("tensorflow")
    levels = tf_logger.level, absl_logging.get_verbosity()
    yield run_all.main
    tf_logger.setLevel(levels[0])
    absl_logging.set_verbosity(levels[1])


def test_flop_formula_matches_the_matmul_list():
    cfg = bench_util.model_config("base")
    # BERT-Base forward, one sequence of 128: 12 layers x 2 x (4 H^2 + 2 H I) per token
    # + 12 x 4 S^2 H attention + pooler.
    per_token = 12 * 2 * (4 * 768 ** 2 + 2 * 768 * 3072)
    want = 128 * per_token + 12 * 4 * 128 ** 2 * 768 + 2 * (768 ** 2 + 2 * 768)
    assert bench_util.forward_flops(cfg, 1, 128) == want
    assert bench_util.training_flops(cfg, 4, 128, 20) == 3 * bench_util.forward_flops(
        cfg, 4, 128, 20)
    for training in (False, True):
        listed = sum(2 * b * m * k * n for b, m, k, n, _, _ in
                     bench_util.step_matmuls(cfg, 4, 128, 20 if training else 0, training))
        formula = (bench_util.training_flops(cfg, 4, 128, 20) if training
                   else bench_util.forward_flops(cfg, 4, 128))
        assert listed == pytest.approx(formula, rel=1e-4)  # all but the tiny NSP layer


def test_data_benchmark_rows_are_adapted_to_the_schema():
    tokenizer_rows = [
        {"name": "ours, exact path (pure Python)", "mb_per_s": 1.0, "identical": True},
        {"name": "ours, batch path (tensorflow_text)", "mb_per_s": 8.0, "identical": True},
        {"name": "HF tokenizers BertWordPiece (encode_batch)", "mb_per_s": 4.0},
        {"name": "something else", "mb_per_s": 9.0},
    ]
    rows = run_all.tokenization_rows(tokenizer_rows)
    assert [r["ours"] for r in rows] == [1.0, 8.0]
    assert all(set(r) == SCHEMA and r["peer"] == 4.0 for r in rows)
    assert rows[1]["ratio"] == 2.0
    cpd_rows = [{"mode": "baseline", "input_mb": 1, "instances_per_s": 10.0},
                {"mode": "default", "input_mb": 1, "instances_per_s": 30.0}]
    rows = run_all.create_pretraining_data_rows(cpd_rows)
    assert len(rows) == 1 and rows[0]["ratio"] == 3.0 and set(rows[0]) == SCHEMA
    ready = [dict(measure="m", config="c", ours=2.0, peer=1.0, unit="u", ratio=2.0, extra=1)]
    want = dict({k: ready[0].get(k) for k in SCHEMA}, against="peer")
    assert run_all.tokenization_rows(ready) == [want]
    assert [name for name, _ in run_all.plan("quick", 1, 1)] == [
        "pretraining", "inference", "optimizer", "memory", "tokenization",
        "create_pretraining_data"]


def test_missing_data_benchmark_is_a_visible_row(monkeypatch):
    monkeypatch.setattr(run_all, "_load", lambda name: None)
    notes = []
    rows = run_all.run_data_benchmark("tokenization", {}, run_all.tokenization_rows, notes)
    assert len(rows) == 1 and rows[0]["ours"] is None
    assert rows[0]["note"].startswith("not run: benchmarks/bench_tokenization.py")
    assert "not run" in bench_util.format_table(rows) and notes


def test_the_header_names_the_cpus_instruction_sets():
    header = bench_util.machine_header({"fp32": 100.0, "bf16": 150.0}, load=[1.5])
    assert header["isa"] == machine.isa_summary()
    line = run_all.header_line(dict(header, mode="quick", seconds=12.0, gemm={},
                                    isa="AVX2 yes, AVX-512 no, VNNI no, AMX no, bf16 no"))
    assert " (ISA: AVX2 yes, AVX-512 no, VNNI no, AMX no, bf16 no), %d cores;" % (
        header["cores"]) in line
    assert "matmul peak fp32 100.0 / bf16 150.0 GFLOP/s, load average 1.5:" in line
    # bench_util's bf16/AMX flags are the same /proc/cpuinfo line's.
    assert bench_util.cpu_flags() == sorted(
        f for f in machine.cpu_flags() or () if "bf16" in f or "amx" in f or f == "avx512f")


def test_peers_skipped_on_purpose_say_so(monkeypatch):
    monkeypatch.setenv("BERT_TF2_PEERS", "0")
    assert bench_util.peer_python() == (None, "skipped on purpose (make bench PEERS=0)")
    monkeypatch.setenv("BERT_TF2_PEERS", "1")
    monkeypatch.setenv("BERT_TF2_PEER_PYTHON", "/nonexistent/python")
    python, why = bench_util.peer_python()
    assert python is None and "/nonexistent/python" in why


def test_degenerate_peer_rows_are_marked_and_no_wins():
    def rows(config, peer_fraction):
        return [bench_util.row("pretraining step", config, 18.0, 1.7, "sequences/s"),
                bench_util.row("pretraining FLOP/s / fp32 matmul peak", config, 0.9,
                               peer_fraction, "fraction")]
    table = rows("mini bf16 xla=off", 0.05) + rows("mini fp32 xla=off", 0.6)
    bench_util.mark_degenerate_peers(table, {"fp32": 60.0, "bf16": 55.0})
    assert all(r["note"].startswith("peer degenerate on this CPU") for r in table[:2])
    assert not any(r.get("note") for r in table[2:])
    import write_readme  # pylint: disable=import-outside-toplevel
    assert [r for r in table if write_readme.is_win(r)] == [table[2]]


def test_bf16_rows_are_judged_wherever_avx512_bf16_or_amx_is_present():
    # Issue 74's rule: avx512_bf16 (AMD EPYC Zen 4, no AMX) or AMX is enough; only a CPU
    # with neither (or whose flags cannot be read) leaves its bf16 rows unjudged.
    import write_readme  # pylint: disable=import-outside-toplevel

    def table():
        return [bench_util.row("inference forward", "base bf16 xla=off", 20.0, 10.0,
                               "sequences/s"),
                bench_util.row("inference forward", "base fp32 xla=off", 20.0, 10.0,
                               "sequences/s")]
    for flags in (["amx_bf16", "amx_tile", "avx512_bf16", "avx512f"], ["avx512_bf16", "avx512f"],
                  ["amx_bf16", "amx_tile"]):
        rows = table()
        assert bench_util.mark_unjudged_bf16(rows, {"fp32": 210.0, "bf16": 400.0}, flags) is None
        assert sum(map(write_readme.is_win, rows)) == 2 and not any(r.get("note") for r in rows)
    for flags in (["avx512f"], []):   # AVX-512 without bf16; no flags readable
        rows = table()
        line = bench_util.mark_unjudged_bf16(rows, {"fp32": 210.0, "bf16": 52.5}, flags)
        assert line == ("bf16 rows not measurable on this CPU: no avx512_bf16 or AMX (bf16 "
                        "matmul peak 0.25x the fp32 peak); they are judged where either is "
                        "present; their slowest sides are timed in one round here")
        assert rows[0]["note"] == "bf16 not judged on this CPU (no avx512_bf16 or AMX)"
        assert not rows[1].get("note")
        assert [r for r in rows if write_readme.is_win(r)] == [rows[1]]
    rendered = write_readme.render({"machine": {"bf16": line}, "rows": rows})
    assert "higher is better. bf16 rows not measurable on this CPU" in rendered.splitlines()[0]
    assert "1 rows left out as bf16 not judged on this CPU" in rendered
    assert not hasattr(bench_util, "has_bf16_units")


@pytest.mark.slow
def test_model_benchmarks_run_in_quick_mode(monkeypatch):
    """Every row of the model benchmarks. memory.py's child (its own process so that each
    size's allocator peak is its own) runs in this process, subprocess.run stood in for:
    what is tested is the child's command line and environment (the BFC allocator, which
    bert_tf2 also selects here) and the parent's reading of what it prints."""
    import inference
    import memory
    import optimizer
    import pretraining
    children = []

    def child(argv, env, **unused):
        del unused
        assert argv[:3] == [sys.executable, os.path.abspath(memory.__file__), "--_child"]
        assert env["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
        assert os.environ.get("TF_CPU_ALLOCATOR_USE_BFC") == "true"  # so here too
        children.append(argv[3])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            memory.main(argv[2:])
        return subprocess.CompletedProcess(argv, 0, out.getvalue(), "")

    monkeypatch.setattr(memory, "subprocess", types.SimpleNamespace(run=child))
    rows = (pretraining.run(quick=True, log=None) + inference.run(quick=True, log=None)
            + optimizer.run(quick=True, log=None) + memory.run(quick=True, log=None))
    assert children == [bench_util.QUICK_SIZE]
    assert [r["measure"] for r in rows] == [
        "pretraining step", "pretraining step bound: its matmuls alone",
        "pretraining FLOP/s / fp32 matmul peak",
        "inference forward", "inference bound: its matmuls alone",
        "inference FLOP/s / fp32 matmul peak"] + [
        "optimizer update (clip + AdamWeightDecay)"] * 2 + [
        "training step peak memory (gradient checkpointing vs none)",
        "training step speed (gradient checkpointing vs none)"]
    for r in rows:
        assert set(r) == SCHEMA
        assert r["ours"] > 0 and r["peer"] > 0 and r["ratio"] == r["ours"] / r["peer"]
    # Allocator peaks do not depend on timing: recomputation keeps less even on a tiny model.
    assert rows[-2]["ours"] < rows[-2]["peer"]
    print(bench_util.format_table(rows))


@pytest.mark.slow
def test_optimizer_kernel_counts_of_a_tiny_model():
    import optimizer
    # The one-layer quick size: every variant's graph, XLA calls and HLO all the same.
    rows = {r["variant"].split(" (")[0].split(",")[0]: r
            for r in optimizer.kernel_counts(bench_util.QUICK_SIZE)}
    op_by_op = rows["TF1 op by op"]
    device = next(r for name, r in rows.items() if "one XLA call per device" in r["variant"])
    # The op-by-op update runs TF ops only; one fused computation holds all of the device's.
    assert op_by_op["xla_launches"] == 0 and op_by_op["compute_ops"] > 10 * device["compute_ops"]
    assert device["xla_launches"] == 1 and device["hlo_kernels"] >= device["hlo_fusions"] > 0
    print(optimizer.format_kernel_table(bench_util.QUICK_SIZE, list(rows.values())))


def test_readme_tables_come_from_the_results_between_markers():
    import write_readme  # pylint: disable=import-outside-toplevel
    rows = [bench_util.row("pretraining step", "mini fp32", 12.0, 10.0, "sequences/s"),
            dict(bench_util.row("pretraining step", "mini bf16", 18.0, 1.7, "sequences/s"),
                 note="peer degenerate on this CPU (peer at 5% of the matmul peak)"),
            dict(bench_util.row("fine-tuning train", "sst-2, vs torch peer", 30.0, None,
                                "examples/s"), note="peer not run: skipped on purpose")]
    machine = {"date": "2026-11-22 23:00 UTC", "cpu": "Test CPU", "cores": 2, "mode": "quick",
               "seconds": 60.0, "fp32_peak_gflops": 65.0, "bf16_peak_gflops": 61.0,
               "load": [1.0, 2.0, 3.0], "notes": ["torch peers: not run"]}
    tables = write_readme.render({"machine": machine, "rows": rows})
    assert "Test CPU, 2 cores" in tables and "fp32 65.0, bf16 61.0 GFLOP/s" in tables
    assert "peer not run: skipped on purpose" in tables
    assert "ahead (ours / peer >= 1) on 1 of 1 rows (bounds and fractions aside); 1 rows " \
        "left out as peer degenerate on this CPU" in tables
    old = "intro\n%s\nstale table\n%s\nkept\n" % (write_readme.BEGIN, write_readme.END)
    new = write_readme.update(old, tables)
    assert "stale table" not in new and new.startswith("intro\n") and new.endswith("kept\n")
    assert tables in new


def test_each_machine_kind_keeps_its_own_tables_with_cpu_and_gemm_named():
    import write_readme  # pylint: disable=import-outside-toplevel
    rows = [bench_util.row("run_squad predict", "seq 384, vs torch peer", 8.7, 10.0,
                           "features/s")]
    header = {"cpu": "Intel(R) Xeon(R) Test", "cpu_vendor": "Intel", "cores": 2,
               "gemm": {"ours": "oneDNN v3.7.3", "peer": "MKL 2024.2, BLAS_INFO=mkl"},
               "isa": machine.isa_summary({"avx2", "avx512f", "avx512_bf16"})}
    tables = write_readme.render({"machine": header, "rows": rows})
    assert "GEMM library: ours oneDNN v3.7.3; torch MKL 2024.2, BLAS_INFO=mkl." in tables
    assert ("CPU ISA: AVX2 yes, AVX-512 yes, VNNI no, AMX no, bf16 yes (avx512_bf16)."
            in tables.splitlines()[0])
    assert ("Behind their peer on Intel(R) Xeon(R) Test: run_squad predict, seq 384, "
            "vs torch peer (0.870).") in tables
    amd_begin, amd_end = write_readme.markers("AMD")
    old = "intro\n%s\nAMD table\n%s\nkept\n" % (amd_begin, amd_end)
    new = write_readme.update(old, tables, "Intel")
    assert "AMD table" in new and new.index("AMD table") < new.index(tables)
    assert write_readme.markers("Intel")[0] in new
    again = write_readme.update(new, "newer Intel run\n", "Intel")
    assert "AMD table" in again and "newer Intel run" in again and tables not in again
    assert bench_util.cpu_vendor() in ("Intel", "AMD") or bench_util.cpu_vendor()
    # An AVX2-only CPU's run has a block of its own beside its vendor's AVX-512 one.
    assert write_readme.machine_kind(header) == "Intel"
    avx2 = dict(header, cpu_vendor="AMD", isa=machine.isa_summary({"avx2"}))
    assert write_readme.machine_kind(avx2) == "AMD AVX2"
    assert write_readme.machine_kind(dict(avx2, cpu_vendor="unknown")) is None
    both = write_readme.update(old, "AVX2 run\n", write_readme.machine_kind(avx2))
    assert "AMD table" in both and write_readme.markers("AMD AVX2")[0] in both


@pytest.mark.slow
def test_long_text_task_puts_the_label_in_the_last_paragraph(shared_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_TF2_SHARED", str(shared_dir))
    import bench_long_text  # pylint: disable=import-outside-toplevel
    task = bench_long_text.make_task(str(tmp_path))
    assert (task["train"], task["dev"]) == (390, 199)
    articles = dict(bench_long_text._articles())  # pylint: disable=protected-access
    group = {p: i for i, titles in enumerate(task["groups"]) for t in titles
             for p in articles[t]}
    texts = {}
    for split in ("train", "dev"):
        with open(str(tmp_path / ("%s.tsv" % split)), encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f.read().splitlines()[1:]]
        texts[split] = {text for text, _ in rows}
        for text, label in rows:
            last = [p for p in group if text.endswith(p)]
            assert len(last) == 1 and group[last[0]] == int(label)
            assert not any(p in text[:-len(last[0])] for p in group)  # filler first
    assert not texts["train"] & texts["dev"]


def test_rows_of_our_own_paths_are_reported_but_not_counted():
    import write_readme  # pylint: disable=import-outside-toplevel
    table = [bench_util.row("fine-tuning train", "sst-2, vs torch peer", 30.0, 10.0,
                            "examples/s"),
             bench_util.row("fine-tuning train", "sst-2, vs ours --notrim_padding", 30.0,
                            60.0, "examples/s", against="ours"),
             bench_util.row("optimizer update", "mini, vs peer", 9.0, 10.0, "updates/s")]
    assert [write_readme.is_judged(r) for r in table] == [True, False, True]
    assert [write_readme.is_win(r) for r in table] == [True, False, False]
    rendered = write_readme.render({"machine": {}, "rows": table})
    assert "ahead (ours / peer >= 1) on 1 of 2 rows" in rendered
    assert "Behind their peer on ?: optimizer update, mini, vs peer (0.900)." in rendered
    assert "1 rows compare two paths of our own" in rendered


def test_profile_ops_puts_our_ops_in_their_classes():
    import profile_ops  # pylint: disable=import-outside-toplevel
    layer = "bert/encoder/layer_0/"
    cases = {
        (layer + "attention/self/BiasAdd", "_MklNativeFusedMatMul"): "QKV matmul",
        (layer + "attention/self/scores/add", "_MklFusedBatchMatMulV2"): "scores batch-matmul",
        (layer + "attention/self/map/while/scores/add", "_MklFusedBatchMatMulV2"):
            "scores batch-matmul",
        (layer + "attention/self/softmax/Softmax", "_MklSoftmax"): "softmax",
        (layer + "attention/self/context/MatMul", "_MklBatchMatMulV2"): "context batch-matmul",
        (layer + "attention/output/dense/BiasAdd", "_MklNativeFusedMatMul"):
            "attention-output matmul",
        (layer + "attention/output/LayerNorm/add", "_MklLayerNorm"): "LayerNorm",
        (layer + "intermediate/dense/BiasAdd", "_MklNativeFusedMatMul"): "FFN matmuls",
        (layer + "output/add", "_MklNativeFusedMatMul"): "FFN matmuls",
        (layer + "intermediate/Gelu/Tanh", "Tanh"): "GELU",
        ("bert/attention_mask/mul", "Mul"): "mask add / scale",
        ("bert/embeddings/Gather", "ResourceGather"): "gathers / embeddings",
        (layer + "attention/self/transpose", "_MklTranspose"): "other",
    }
    for (name, op_type), want in cases.items():
        assert profile_ops.op_class(name, op_type) == want, (name, op_type)
    totals = {"%s (%s)" % key: [2000.0, 1] for key in cases}
    classes = profile_ops.classify(totals, forwards=2)
    assert classes["FFN matmuls"] == 2.0 and classes["scores batch-matmul"] == 2.0
    assert set(classes) <= set(profile_ops.CLASSES)


def test_bench_attention_times_our_two_forms_and_names_a_bad_shape():
    import bench_attention  # pylint: disable=import-outside-toplevel
    result = bench_attention.measure((2, 2, 8, 4), rounds=2, calls=1, peer=None)
    assert set(result) == {"ours whole batch", "ours by row"}
    assert all(ms > 0 for ms in result.values())
    text = bench_attention.table([((2, 2, 8, 4), result)], "not run: no venv")
    assert "| 2x2x8x4 |" in text and "not run: no venv" in text
    with pytest.raises(SystemExit, match="'8x12' is not BxNxSxD"):
        bench_attention.parse_shape("8x12")


def test_repeated_runs_rows_and_group(tmp_path):
    import bench_memory  # pylint: disable=import-outside-toplevel
    measured = [(1, 1000.0, 9.0, {"eval_accuracy": 0.5}), (2, 1010.0, 5.0, {"eval_accuracy": 0.5}),
                (3, 1030.0, 5.0, {"eval_accuracy": 0.5}), (4, 1025.5, 5.0, {"eval_accuracy": 0.5})]
    rows = bench_memory.rows_of("tiny", measured)
    assert [(r["measure"], r["ours"]) for r in rows] == [
        ("RSS after run 1 of 4", 1000.0), ("RSS after run 2 of 4", 1010.0),
        ("RSS after run 4 of 4", 1025.5), ("RSS growth over runs 3-4 (goal < 100)", 15.5),
        ("same eval metrics in every run", 1.0)]
    assert all(set(r) == SCHEMA and r["against"] == "ours" for r in rows)
    measured[3] = (4, 1025.5, 5.0, {"eval_accuracy": 0.75})
    assert bench_memory.rows_of("tiny", measured)[-1]["ours"] == 0.0
    skipped = bench_memory.rows_of("minilm", None)
    assert skipped[0]["ours"] is None and skipped[0]["note"].startswith("not run")
    rss = bench_memory.vm_rss_mib()
    assert rss is None or rss > 10.0
    # run_all's group: bench_memory.py, without ../shared, in the --full plan (OWN_PATH_GROUPS).
    assert run_all._load("repeated_runs").rows_of.__doc__ == bench_memory.rows_of.__doc__
    assert ("repeated_runs", {"runs": 10}) in run_all.plan("full", 1, 1)
    bench_memory.write_reviews(str(tmp_path))
    with open(tmp_path / "train.csv", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) == 17 and lines[1] == '0,"the battery was not good",positive'


def test_the_predictor_group_counts_requests_from_threads():
    import bench_predictor  # pylint: disable=import-outside-toplevel
    calls = []
    lock = threading.Lock()

    def call():
        with lock:
            calls.append(threading.get_ident())

    assert bench_predictor._throughput(call, 4, 20) > 0  # pylint: disable=protected-access
    assert len(calls) == 20 and len(set(calls)) == 4
    assert ("predictor", {"sizes": ("tiny", "mini"), "repeats": 3}) in run_all.plan(
        "default", 1, 3)
    assert run_all._load("predictor").run.__doc__ == bench_predictor.run.__doc__


def test_chinese_corpus_and_its_boundary_file_agree(shared_dir, tmp_path):
    """bench_create_pretraining_data's zh_wwm input: what --word_boundary_file accepts."""
    vocab = shared_dir / "data" / "vocab" / "chinese_vocab.txt"
    if not vocab.is_file():
        pytest.skip("%s not found" % vocab)
    import bench_create_pretraining_data  # pylint: disable=import-outside-toplevel
    text, bounds, size = bench_create_pretraining_data.chinese_corpus(
        str(tmp_path), str(vocab), 0.05)
    assert 0.05 <= size < 0.06
    with open(text, encoding="utf-8") as f:
        lines = f.read().split("\n")
    with open(bounds, encoding="utf-8") as f:
        words = f.read().split("\n")
    assert len(lines) == len(words) and lines.count("") > 20  # many documents
    for line, spaced in zip(lines, words):
        assert "".join(line.split()) == "".join(spaced.split())
    assert sum(len(w) > 1 for line in words for w in line.split()) > 1000  # real words


@pytest.mark.slow
def test_finetuning_bench_predicts_from_an_encoder_checkpoint(tmp_path):
    """bench_finetuning's predicting Runner starts from a checkpoint without the task
    head (a converted pre-trained model): the encoder's weights are the checkpoint's."""
    import bench_finetuning  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import checkpoints, heads  # pylint: disable=import-outside-toplevel
    config = modeling.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32)
    donor = heads.BertClassifier(config, 2)
    donor(heads.dummy_features())
    encoder = {name: var.numpy() for name, var in
               checkpoints.tf1_variable_map(donor).items() if name.startswith("bert/")}
    prefix = checkpoints.write_tf1_checkpoint(encoder, str(tmp_path / "pre" / "bert_model.ckpt"))
    ours = bench_finetuning.Ours(config, prefix, str(tmp_path))
    runner = ours._runner("tiny", lambda: heads.BertClassifier(config, 2), True)  # pylint: disable=protected-access
    served = checkpoints.tf1_variable_map(runner.model)
    assert set(encoder) < set(served)
    for name, value in encoder.items():
        np.testing.assert_array_equal(served[name].numpy(), value)


@pytest.mark.slow
def test_step_parts_times_the_step_with_and_without_the_update(capsys, monkeypatch):
    """benchmarks/step_parts.py: both variants run, each as a child command line of its
    own, and are reported. The children run in this process (subprocess.run stood in for:
    what is tested is the command line each child gets and the parent's reading of what
    it prints, not a process start; the stand-in update of a child is undone after it)."""
    import step_parts  # pylint: disable=import-outside-toplevel
    from bert_tf2.base import fused_update  # pylint: disable=import-outside-toplevel
    update = fused_update.FusedOptimizer.apply_gradients
    monkeypatch.setattr(fused_update.FusedOptimizer, "apply_gradients", update)
    children = []

    def child(argv, **unused):
        del unused
        assert argv[:2] == [sys.executable, step_parts.__file__]
        children.append(argv[argv.index("--child") + 1])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            step_parts.main(argv[2:])
        fused_update.FusedOptimizer.apply_gradients = update
        return subprocess.CompletedProcess(argv, 0, out.getvalue(), "")

    monkeypatch.setattr(step_parts, "subprocess", types.SimpleNamespace(run=child))
    step_parts.main(["--size", "tiny", "--batch_size", "2", "--rounds", "1", "--repeats", "1"])
    assert children == ["full", "without_update"]
    out = capsys.readouterr().out
    assert re.search(r"tiny b2 s128 fp32: step [\d.]+ ms, without the update [\d.]+ ms", out)
    assert "fraction x" in out


def _serving_speeds(**changes):
    """{side: examples/s} of one bench_int8 batch, every peer present (hand-picked)."""
    speed = {"SavedModel fp32": 20.0, "SavedModel bf16": 40.0, "LiteRT dynamic_int8": 50.0,
             "LiteRT int8": 60.0, "torch": 30.0, "onnxruntime fp32": 25.0,
             "onnxruntime int8": 75.0, "openvino fp32": 16.0, "openvino bf16": 50.0,
             "torch bf16": 32.0, "SavedModel bf16 in the bench process": 25.0}
    speed.update(changes)
    return {k: v for k, v in speed.items() if v is not None}


def test_serving_rows_name_each_peer_and_judge_the_bf16_goals():
    import bench_int8  # pylint: disable=import-outside-toplevel
    rows = bench_int8.serving_rows("minilm", 32, _serving_speeds(), True,
                                   "6 Attention, 12 SkipLayerNormalization")
    by = {(r["measure"], r["config"]): r for r in rows}
    assert all(SCHEMA <= set(r) for r in rows) and len(by) == len(rows) == 11
    best = by[("serving int8: our best LiteRT vs ONNX Runtime int8 (fused, quantize_dynamic)",
               "minilm, batch 32, seq 128, ours int8, ONNX Runtime fused 6 Attention, "
               "12 SkipLayerNormalization")]
    assert (best["ours"], best["peer"], best["ratio"]) == (60.0, 75.0, 0.8)
    openvino = by[("serving fp32: SavedModel vs OpenVINO fp32 (precision hint f32)",
                   "minilm, batch 32, seq 128")]
    assert openvino["ratio"] == 1.25 and openvino["against"] == "peer"
    bf16 = [r for r in rows if r["measure"].startswith("serving bf16")]
    assert [(r["ratio"], r["against"], r.get("note")) for r in bf16] == [
        (2.0, "ours", "goal >= 1.6x: met"), (1.25, "peer", "goal >= 1.0x: met"),
        (0.8, "peer", None), (1.6, "ours", None)]
    # The bf16 export is served by a process of its own (serve_saved_model.py): the rows say
    # how, and one compares it with the export loaded in the bench's process.
    assert all(r["config"] == "minilm, batch 32, seq 128, bf16" + bench_int8.FROZEN
               for r in bf16)
    # Batch 1 rows give both latencies; a CPU without bf16: no OpenVINO bf16 row, the goals
    # not measurable, and such rows neither wins nor losses.
    rows = bench_int8.serving_rows("base", 1, _serving_speeds(**{
        "openvino bf16": None, "SavedModel bf16": 30.0,
        "SavedModel bf16 in the bench process": None}), False)
    bf16 = [r for r in rows if r["measure"].startswith("serving bf16")]
    assert [r["config"] for r in bf16] == [
        "base, batch 1, seq 128, bf16%s (batch-1 latency 33.3 ms vs %s ms)"
        % (bench_int8.FROZEN, peer) for peer in ("50.0", "31.2")]
    assert [r["note"] for r in bf16] == [
        "goal >= %.1fx: not measurable on this CPU (no avx512_bf16 or AMX)" % g
        for g in (1.6, 1.0)]
    import write_readme  # pylint: disable=import-outside-toplevel
    assert not any(write_readme.is_judged(r) for r in bf16)
    rendered = write_readme.render({"machine": {}, "rows": rows})
    assert "2 rows left out as not measurable on this CPU" in rendered
    assert "Speed goals: 2 not measurable on this CPU." in rendered
    assert "serving bf16" not in rendered.split("Behind their peer")[1]


def test_serving_rows_without_peers_and_bf16_cpu_flags():
    import bench_int8  # pylint: disable=import-outside-toplevel
    speed = _serving_speeds(**{k: None for k in ("torch", "onnxruntime fp32", "onnxruntime int8",
                                                 "openvino fp32", "openvino bf16",
                                                 "torch bf16")})
    rows = bench_int8.serving_rows("minilm", 32, speed, True)
    peers = [r for r in rows if r["against"] == "peer"]
    assert len(peers) == 6 and all(r["peer"] is None and r["ratio"] is None for r in peers)
    assert peers[-1]["note"] == "goal >= 1.0x: not judged, a side did not run"
    assert bench_util.bf16_measurable(["avx512f", "avx512_bf16"])
    assert bench_util.bf16_measurable(["amx_bf16", "amx_tile"])
    assert not bench_util.bf16_measurable(["avx2", "avx512f", "avx512_vnni"])
    assert not bench_util.bf16_measurable(set())
    # The bf16 marker (no avx512_bf16, no AMX: not judged) leaves rows with a goal verdict alone.
    table = [bench_util.row("serving bf16: a", "minilm, bf16", 2.0, 1.0, "examples/s"),
             bench_util.row("inference forward", "base bf16", 2.0, 1.0, "examples/s")]
    table[0]["note"] = bench_util.goal_note(2.0, 1.0, True)
    assert bench_util.mark_unjudged_bf16(table, {"fp32": 200.0, "bf16": 380.0},
                                         ["avx2", "avx512f"])
    assert table[0]["note"] == "goal >= 1.0x: met"
    assert table[1]["note"].startswith("bf16 not judged on this CPU")


def test_bf16_sides_are_timed_in_one_round_where_bf16_is_not_judged():
    # Software bf16 (torch autocast on an AVX2 CPU: 53 s a BERT-Base batch of 32) is timed
    # once there (without a second warm-up call); where the CPU judges bf16, every side
    # gets the same rounds.
    import bench_finetuning  # pylint: disable=import-outside-toplevel
    import bench_int8  # pylint: disable=import-outside-toplevel
    no_bf16, bf16 = ["avx2", "avx512f", "avx512_vnni"], ["avx512f", "avx512_bf16"]
    names = ["SavedModel fp32", "LiteRT dynamic_int8", "torch", "onnxruntime int8",
             "SavedModel bf16", bench_int8.BF16_IN_PROCESS, "torch bf16"]
    assert bench_int8.side_rounds(names, 32, 5, bf16) == dict.fromkeys(names, 3)
    assert bench_int8.side_rounds(names, 1, 5, no_bf16) == dict.fromkeys(names, 5)
    rounds = bench_int8.side_rounds(names, 32, 5, no_bf16)
    assert rounds == dict(dict.fromkeys(names[:4], 3), **dict.fromkeys(names[4:], 1))
    # Their one round at batch 32 comes without an untimed call when batch 1 made one.
    warm = [n for n in names if bench_int8.needs_warm_up(n, rounds, set(names))]
    assert warm == names[:4]
    assert all(bench_int8.needs_warm_up(n, rounds, set()) for n in names)
    judged = bench_int8.side_rounds(names, 32, 5, bf16)
    assert all(bench_int8.needs_warm_up(n, judged, set(names)) for n in names)
    job = {"kind": "train", "batches": [[i] for i in range(18)], "warmup": 2}
    assert bench_finetuning.bf16_peer_job(job, bf16) == dict(job, autocast="bf16")
    short = bench_finetuning.bf16_peer_job(job, no_bf16)
    assert short == dict(job, autocast="bf16", warmup=1, batches=[[0], [1]])
    plans = {flags: [(item[0], item[1]["repeats"]) for item in run_all.plan(
        "default", 3, 5, list(flags)) if item and item[1].get("dtypes") == ("bf16",)]
        for flags in (tuple(bf16), tuple(no_bf16))}
    assert plans[tuple(bf16)] == [("pretraining", 3), ("inference", 2)]
    assert plans[tuple(no_bf16)] == [("pretraining", 1), ("inference", 1)]


def _predecessors(orders):
    """{side: the sides that ran just before it within a round}."""
    found = {}
    for order in orders:
        for before, name in zip(order, order[1:]):
            found.setdefault(name, set()).add(before)
    return found


def test_no_side_always_runs_after_the_same_one():
    # What a side leaves behind (spinning threads, its data in the caches) must not fall on
    # one neighbour's times in every round, as it did when the order only rotated.
    import bench_int8  # pylint: disable=import-outside-toplevel
    names = ["SavedModel fp32", bench_int8.BF16_IN_PROCESS, "SavedModel bf16",
             "LiteRT dynamic_int8", "torch", *bench_int8.PEER_SIDES]
    orders = [bench_util.round_order(names, r) for r in range(5)]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert orders == [bench_util.round_order(list(names), r) for r in range(5)]  # repeatable
    assert len({tuple(order) for order in orders}) == 5
    rotated = [names[r:] + names[:r] for r in range(5)]
    assert all(len(before) == 1 for before in _predecessors(rotated).values())
    assert all(len(before) > 1 for before in _predecessors(orders).values())


def test_the_row_against_onnx_runtime_int8_says_how_close_each_side_is_to_its_fp32():
    import agreement  # pylint: disable=import-outside-toplevel
    import bench_int8  # pylint: disable=import-outside-toplevel
    reference = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    other = np.array([[1.0, 0.0], [1.0, 1.0], [-3.0, -4.0]])
    assert np.allclose(agreement.cosine_range(reference, other),
                       [-1.0, (1.0 + 0.5 ** 0.5 - 1.0) / 3])
    agreed = {"LiteRT int8": [0.99, 0.998], "LiteRT dynamic_int8": [0.995, 0.999],
              "onnxruntime int8": [0.88, 0.957], "_texts": "256 SST-2 dev sentences"}
    rows = bench_int8.serving_rows("minilm", 32, _serving_speeds(), True, "", None, agreed)
    noted = {r["measure"]: r.get("note") for r in rows}
    assert noted["serving int8: our best LiteRT vs ONNX Runtime int8 (fused, quantize_dynamic)"] \
        == ("cosine with its own fp32 sentence vectors on 256 SST-2 dev sentences (min / "
            "mean): ours 0.9900 / 0.9980, ONNX Runtime int8 0.8800 / 0.9570")  # int8 is best
    assert sum("cosine" in (note or "") for note in noted.values()) == 1
    # Without the peer's figures (no peer venv) or ../shared, no such note.
    del agreed["onnxruntime int8"]
    rows = bench_int8.serving_rows("minilm", 32, _serving_speeds(), True, "", None, agreed)
    assert not any("cosine" in (r.get("note") or "") for r in rows)


def test_serving_rows_never_pick_an_int8_model_over_its_bound_as_our_best():
    # The export's report as MiniLM's (random calibration words) gave it: int8 under the bound.
    import bench_int8  # pylint: disable=import-outside-toplevel
    report = {"variants": {"dynamic_int8": {"results": {"calibration": {"agreement": 0.997}}},
                           "int8": {"results": {"calibration": {"agreement": 0.878041}}}},
              "warnings": ["LiteRT int8 (int8 weight matmuls only) loses more than "
                           "--max_metric_drop=1 points against the SavedModel"]}
    notes = bench_int8.over_bound_notes(report)
    assert notes == {"int8": "over its agreement bound (calibration agreement 87.8%), kept by "
                             "--keep_int8_over_bound"}
    rows = bench_int8.serving_rows("minilm", 32, _serving_speeds(), True, "", notes)
    best = [r for r in rows if r["measure"].startswith("serving int8: our best")]
    assert [(r["config"], r["ours"], r["ratio"]) for r in best] == [
        ("minilm, batch 32, seq 128, ours dynamic_int8", 50.0, 50.0 / 75.0)]
    assert [r.get("note") for r in rows if r["config"].endswith(", int8")] == [notes["int8"]] * 2
    assert bench_int8.serving_rows("minilm", 32, _serving_speeds(), True)[4]["ours"] == 60.0
    # A shorter run (--variants dynamic_int8): the int8 rows are absent, not None.
    rows = bench_int8.serving_rows("minilm", 1, _serving_speeds(**{"LiteRT int8": None}), True)
    assert [r["config"].split(" (")[0] for r in rows[:3]] == [
        "minilm, batch 1, seq 128, dynamic_int8"] * 2 + [
        "minilm, batch 1, seq 128, ours dynamic_int8"]
    for bad in (dict(variants=("fp16",)), dict(batches=(8,)), dict(variants=())):
        with pytest.raises(ValueError, match="variants must be among"):
            bench_int8.run(**bad)


def test_bf16_fine_tuning_rows_judge_their_goals(monkeypatch):
    import bench_finetuning  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(bench_util, "bf16_measurable", lambda flags=None: True)
    ours = [bench_finetuning.bf16_train_row(30.0, 20.0, "sst-2, minilm, batch 32, seq 128, bf16")]
    rows = bench_finetuning.finish_rows(ours, {"results": [{"count": 64, "seconds": 4.0}]})
    assert [(r["config"].split(", vs ")[1], r["ours"], r["peer"], r["ratio"], r["against"],
             r.get("note")) for r in rows] == [
        ("torch peer under torch.autocast bf16", 30.0, 16.0, 1.875, "peer", "goal >= 1.0x: met"),
        ("our fp32", 30.0, 20.0, 1.5, "ours", "goal >= 1.4x: met")]
    monkeypatch.setattr(bench_util, "bf16_measurable", lambda flags=None: False)
    ours = [bench_finetuning.bf16_train_row(24.0, 20.0, "sst-2, minilm, bf16")]
    rows = bench_finetuning.finish_rows(ours, {"results": [{"count": 64, "seconds": 2.0}]})
    assert [r["note"] for r in rows] == [
        "goal >= %.1fx: not measurable on this CPU (no avx512_bf16 or AMX)" % g
        for g in (1.0, 1.4)]
    rows = bench_finetuning.finish_rows(ours, None, "skipped on purpose")
    assert rows[0]["note"] == "peer not run: skipped on purpose" and rows[0]["ratio"] is None


@pytest.mark.slow
def test_every_group_runs_in_a_process_of_its_own(monkeypatch, tmp_path, main_of_run_all):
    # The model groups too: run in run_all's own process they left it holding 11.3 GB, and a
    # whole run was ended by the OOM killer in its int8 group (2026-11-27).
    asked = []
    monkeypatch.setattr(run_all, "_run_in_child", lambda name, kwargs: asked.append(name) or [])
    monkeypatch.setattr(bench_util, "matmul_peak", lambda *a, **k: 100.0)
    main_of_run_all(["--quick", "--only", "optimizer,memory",
                     "--output", str(tmp_path / "out.json")])
    assert asked == ["optimizer", "memory"]
    assert set(run_all.MODEL_BENCHMARKS) <= {name for name, _ in run_all.plan("quick", 1, 1)}


def test_a_run_keeps_its_groups_done_so_far_and_their_times(monkeypatch, tmp_path,
                                                            main_of_run_all):
    # A whole run takes most of an hour: the groups before a crash (or the OOM killer) are
    # kept in <output>.partial, said to be incomplete; a whole run has each group's time.
    monkeypatch.setattr(bench_util, "matmul_peak", lambda *a, **k: 100.0)
    # The header's GEMM probes (a TensorFlow child, a torch one) run in
    # test_every_group_runs_in_a_process_of_its_own; here they would only repeat.
    monkeypatch.setattr(bench_util, "tf_gemm_library", lambda: "oneDNN (test)")
    monkeypatch.setattr(bench_util, "peer_gemm_library", lambda peers: "MKL (test)")
    out = tmp_path / "out.json"

    def optimizer_then_crash(name, kwargs):
        if name == "memory":
            raise MemoryError("killed")
        return [bench_util.row(name, "-", 2.0, 1.0, "x")]

    monkeypatch.setattr(run_all, "_run_in_child", optimizer_then_crash)
    with pytest.raises(MemoryError):
        main_of_run_all(["--quick", "--only", "optimizer,memory", "--output", str(out)])
    assert not out.exists()
    kept = json.loads((tmp_path / "out.json.partial").read_text())
    assert kept["machine"]["complete"] is False
    assert [r["measure"] for r in kept["rows"]][2:] == ["optimizer"]
    assert [name for name, _ in kept["machine"]["group_seconds"]] == ["optimizer"]

    monkeypatch.setattr(run_all, "_run_in_child", lambda name, kwargs: [])
    main_of_run_all(["--quick", "--only", "optimizer,memory", "--output", str(out)])
    whole = json.loads(out.read_text())
    assert [name for name, _ in whole["machine"]["group_seconds"]] == ["optimizer", "memory"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary left
    assert "Minutes per group: optimizer 0.0, memory 0.0." in write_readme.render(whole)


def test_a_group_left_out_of_the_run_asked_by_only_is_an_error(capsys, main_of_run_all):
    # The default run leaves our own paths' groups to --full: asking for one of them
    # there says so instead of running nothing.
    assert "memory" not in {item[0] for item in run_all.plan("default", 1, 1) if item}
    assert "memory" in {item[0] for item in run_all.plan("full", 1, 1) if item}
    with pytest.raises(SystemExit):
        main_of_run_all(["--only", "memory,tokenization"])
    assert "--only memory: not in the default run's plan (--full runs every group)" in (
        capsys.readouterr().err)
    with pytest.raises(SystemExit):
        main_of_run_all(["--full", "--only", "nonsense"])
    assert "--only nonsense: not in the full run's plan (the groups: pretraining," in (
        capsys.readouterr().err)


def test_finetuning_peer_times_each_job_when_asked_once_and_says_why_it_stopped(
        monkeypatch, tmp_path):
    """bench_finetuning's torch peer stays up and times each row's job when asked (right
    after our side of the row), a job asked again answered from the first time; once
    the peer process ended, every later row says why instead of a number."""
    import bench_finetuning  # pylint: disable=import-outside-toplevel
    asked = []

    class FakePeer:
        def __init__(self, python, script, args):
            with open(args[0], encoding="utf-8") as f:
                asked.append(("start", python, script, json.load(f)))

        def ask(self, **command):
            asked.append(command["op"])
            if command["op"] == "info":
                return {"torch": "2.x", "transformers": "5.x", "threads": 2}
            if command["job"]["kind"] == "crash":
                raise RuntimeError("the peer (peer_finetuning.py) ended without answering")
            return {"seconds": 2.0, "count": len(command["job"]["examples"])}

        def close(self):
            asked.append("close")
    monkeypatch.setattr(bench_util, "peer_python", lambda: ("peer-python", None))
    monkeypatch.setattr(bench_util, "PeerProcess", FakePeer)
    logged = []
    peer = bench_finetuning.Peer({"model_dir": "m"}, str(tmp_path / "spec.json"),
                                 logged.append)
    assert asked == [("start", "peer-python", "peer_finetuning.py", {"model_dir": "m"}),
                     "info"]
    job = {"kind": "train", "examples": [1, 2, 3], "batches": [[0, 1, 2]]}
    assert peer.run(job) == {"seconds": 2.0, "count": 3}
    assert peer.run(json.loads(json.dumps(job))) == {"seconds": 2.0, "count": 3}
    assert asked.count("job") == 1 and peer.why is None
    assert peer.run({"kind": "crash", "examples": []}) is None
    assert peer.why == ("the peer failed (the peer (peer_finetuning.py) ended without "
                        "answering)")
    assert peer.run({"kind": "eval", "examples": [1]}) is None
    peer.close()
    assert asked.count("job") == 2 and asked.count("close") == 1
    assert logged == ["peer: torch 2.x, transformers 5.x, 2 threads", peer.why]
    rows = bench_finetuning.finish_rows(
        [bench_finetuning._row("eval/predict", "sst-2", {False: 10.0}, "examples/s")],  # pylint: disable=protected-access
        {"results": [None]}, peer.why)
    assert rows[0]["note"] == "peer not run: " + peer.why


@pytest.mark.slow
@pytest.mark.parametrize("grouped", [False, True])
def test_finetuning_bench_peer_trains_on_our_very_batches(tmp_path, grouped):
    """The torch peer's training jobs hold the examples of the batches our pipeline gave
    our timed steps, batch for batch (a window's grouped batches differ several times in
    cost: a different sample of them made the grouped ratio swing)."""
    import bench_finetuning  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    import tokenization  # pylint: disable=import-outside-toplevel
    vocab = tmp_path / "vocab.txt"
    words = ["w%d" % i for i in range(30)]
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    rng = np.random.RandomState(3)
    examples = [glue_data.InputExample("train-%d" % i, " ".join(
        rng.choice(words, size=rng.randint(1, 40))), None, str(i % 2)) for i in range(320)]
    path = str(tmp_path / "train.tf_record")
    glue_data.file_based_convert_examples_to_features(examples, ["0", "1"], 128, tokenizer, path)
    features = glue_data.convert_examples_to_features(examples, ["0", "1"], 128, tokenizer)
    peer = [bench_finetuning._peer_example(f.input_ids, f.input_mask, f.segment_ids,  # pylint: disable=protected-access
                                           f.label_id) for f in features]
    config = modeling.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32)
    seen = []
    ours = bench_finetuning.Ours(config, None, str(tmp_path))
    ours.train(path, 2, 3, True, grouped=grouped, seen=seen)
    assert len(seen) == bench_finetuning.WARMUP_STEPS + 3
    batches = bench_finetuning.same_batches(seen, peer)
    assert [[tuple(peer[i]["input_ids"]) for i in b] for b in batches] == seen
    assert all(len(b) == bench_finetuning.BATCH_SIZE for b in batches)
    lengths = [[len(row) for row in batch] for batch in seen]
    if grouped:  # a window's batches: each batch's rows of close lengths
        assert max(max(b) - min(b) for b in lengths) < 30


def _summary_run(vendor, ratios, isa="AVX2 yes, AVX-512 yes"):
    """A fake bench_results.json of a `vendor` CPU: one row per (config, ours / peer, note)."""
    rows = [dict(bench_util.row("fine-tuning train", config, ratio * 10.0, 10.0,
                                "examples/s"), note=note) for config, ratio, note in ratios]
    rows.append(bench_util.row("fine-tuning train", "sst-2, vs ours --notrim_padding", 5.0,
                               1.0, "examples/s", against="ours"))
    rows.append(bench_util.row(  # measured numbers in a config do not split the row
        "serving fp32: SavedModel vs OpenVINO", "minilm, batch 1 (batch-1 latency %s ms vs "
        "9.0 ms)" % vendor, 9.0, 10.0, "examples/s"))
    return {"machine": {"date": "2026-11-28 10:00 UTC", "cpu": vendor + " Test CPU",
                        "cpu_vendor": vendor, "cores": 2, "isa": isa}, "rows": rows}


def test_vendor_summary_says_on_which_kind_each_row_holds(tmp_path):
    goal = "goal >= 1.6x: "
    amd = _summary_run("AMD", [("both", 1.5, None), ("amd", 1.2, None), ("intel", 0.8, None),
                               ("neither", 0.9, None), ("amd alone", 1.1, None),
                               ("goal", 1.3, goal + "missed")])
    intel = _summary_run("Intel", [("both", 1.0, None), ("amd", 0.95, None),
                                   ("intel", 1.3, None), ("neither", 0.5, None),
                                   ("goal", 1.7, goal + "met")])
    readme = tmp_path / "README.md"
    readme.write_text("intro\n", encoding="utf-8")
    for name, run in (("amd", amd), ("intel", intel)):
        (tmp_path / (name + ".json")).write_text(json.dumps(run), encoding="utf-8")
        write_readme.main([str(tmp_path / (name + ".json")), "--readme", str(readme)])
    for name, run in (("amd", amd), ("intel", intel)):  # each kind's run kept as data
        kept = json.loads((tmp_path / "results" / (name + ".json")).read_text("utf-8"))
        assert kept["rows"] == run["rows"] and kept["machine"] == run["machine"]
    text = readme.read_text(encoding="utf-8")
    begin, end = write_readme.markers(write_readme.SUMMARY_KIND)
    summary = text.split(begin)[1].split(end)[0]
    assert text.index(begin) < text.index(write_readme.markers("AMD")[0])  # it heads them
    assert "- **AMD**: AMD Test CPU, 2 cores, `CPU ISA: AVX2 yes, AVX-512 yes`; run of " \
        "2026-11-28 10:00 UTC" in summary and "- **Intel**: Intel Test CPU" in summary
    cells = {line.split(" | ")[1]: line.strip("| ").split(" | ")[2:]
             for line in summary.splitlines() if line.startswith("| fine-tuning")}
    assert cells == {"both": ["", "1.500", "1.000", "all"],
                     "amd": ["", "1.200", "0.950", "AMD only"],
                     "intel": ["", "0.800", "1.300", "Intel only"],
                     "neither": ["", "0.900", "0.500", "none"],
                     "amd alone": ["", "1.100", "—", "AMD only (not judged on Intel)"],
                     "goal": [">= 1.6x", "1.300", "1.700", "Intel only"]}
    serving = [line for line in summary.splitlines() if line.startswith("| serving")]
    assert serving == ["| serving fp32: SavedModel vs OpenVINO | minilm, batch 1 |  | 0.900 | "
                       "0.900 | none |"]
    # A new run of one kind replaces its data and its column; the other kind's stays.
    amd["rows"][0]["ratio"] = 0.5
    (tmp_path / "amd.json").write_text(json.dumps(amd), encoding="utf-8")
    write_readme.main([str(tmp_path / "amd.json"), "--readme", str(readme)])
    again = readme.read_text(encoding="utf-8")
    assert "| both |  | 0.500 | 1.000 | Intel only |" in again and again.count(begin) == 1


def test_readme_block_imported_back_gives_the_rows_render_wrote(tmp_path):
    machine = {"date": "2026-11-27 08:55 UTC", "mode": "default", "seconds": 1487.0,
               "cpu": "Intel(R) Xeon(R) Processor, test", "cpu_vendor": "Intel", "cores": 2,
               "isa": "AVX2 yes, AVX-512 no, VNNI no, AMX no, bf16 no",
               "fp32_peak_gflops": 252.0, "bf16_peak_gflops": 642.2, "load": [1.62, 1.7, 2.0],
               "bf16": "bf16 rows not measurable on this CPU: no avx512_bf16 or AMX (bf16 "
                       "matmul peak 0.78x the fp32 peak); they are judged where either is "
                       "present",
               "notes": ["CPU: Intel(R) Xeon(R) Processor, test (Intel), 2 cores; flags: x",
                         "GEMM library: ours oneDNN; torch MKL"],
               "gemm": {"ours": "oneDNN v3.7.3 (ISA: AVX2; fp32 matmul kernel gemm_api)",
                        "peer": "MKL 2024.2, CPU capability AVX2"},
               "group_seconds": [["pretraining", 48.0], ["int8", 306.0]]}
    rows = [bench_util.row("matmul peak, 2048^3 tf.matmul (best of 5)", "fp32", 252.0, None,
                           "GFLOP/s"),
            bench_util.row("pretraining step", "mini b16 fp32", 75.7, 62.8, "sequences/s"),
            bench_util.row("pretraining FLOP/s / fp32 matmul peak", "mini", 0.601, 0.498,
                           "fraction"),
            dict(bench_util.row("create_pretraining_data instances/s", "baseline", 13662,
                                7992, "instances/s"), note="records identical: 7992"),
            dict(bench_util.row("fine-tuning train", "sst-2, vs torch peer", 201.4, None,
                                "examples/s"), note="peer not run: skipped on purpose"),
            bench_util.row("fine-tuning train", "sst-2, vs ours --notrim_padding", 201.4,
                           33.6, "examples/s", against="ours"),
            dict(bench_util.row("serving bf16: SavedModel bf16 vs torch bf16 autocast",
                                "minilm, batch 1, bf16 (batch-1 latency 10.7 ms vs 36.1 ms)",
                                0.00123, 2.5e5, "examples/s"), note="goal >= 1.0x: missed")]
    tables = write_readme.render({"machine": machine, "rows": rows})
    readme = tmp_path / "README.md"
    readme.write_text(write_readme.update("intro\n", tables, "AMD AVX2"), encoding="utf-8")
    got = write_readme.import_block(readme.read_text(encoding="utf-8"), "AMD AVX2")
    assert write_readme.render(got) == tables
    assert got["machine"] == machine
    for absent in ("bf16", "gemm", "isa", "group_seconds"):  # each header part is optional
        header = dict(machine, **{absent: None})
        block = write_readme.render({"machine": header, "rows": rows})
        assert write_readme.parse_block(block, "AMD AVX2")["machine"] == header
    fields = ("measure", "config", "ours", "peer", "unit", "ratio", "note", "against")
    shown = [{k: write_readme._fmt(r.get(k)) if k in ("ours", "peer", "ratio") else r.get(k)
              for k in fields} for r in rows]
    assert [{k: write_readme._fmt(r[k]) if k in ("ours", "peer", "ratio") else r[k]
             for k in fields} for r in got["rows"]] == shown
    assert got["rows"][3]["ours"] == 13662 and isinstance(got["rows"][3]["ours"], int)
    write_readme.main(["--import-block", "AMD AVX2", "--readme", str(readme)])
    kept = json.loads((tmp_path / "results" / "amd-avx2.json").read_text(encoding="utf-8"))
    assert kept["kind"] == "AMD AVX2" and kept["recovered_from"]["block"] == "AMD AVX2"
    text = readme.read_text(encoding="utf-8")
    assert tables in text and "by `--import-block`" in text
    # A block whose rows do not render it back is refused, naming the line.
    readme.write_text(text.replace("| 75.7 | 62.8 |", "| 75.7 | 62.8 | x |"), encoding="utf-8")
    with pytest.raises(SystemExit, match="--import-block AMD AVX2: line .* 8 cells|render"):
        write_readme.main(["--import-block", "AMD AVX2", "--readme", str(readme)])


def test_ranker_rows_say_whether_the_scores_agree():
    """bench_ranker's rows from made-up timings: pairs/s of each side's median against the
    peer's, the score agreement (AGREEMENT) in the note, the largest difference in
    max_abs_diff; without a peer, not compared."""
    import bench_ranker  # pylint: disable=import-outside-toplevel
    rows = bench_ranker.ranker_rows(
        {"Predictor": [2.0, 1.0, 4.0], "SavedModel rank": [1.0, 0.5, 1.0]}, [2.0, 2.5, 3.0],
        1000, {"Predictor": 3e-7, "SavedModel rank": 2e-3}, 3)
    assert all(SCHEMA <= set(r) for r in rows)
    assert [(r["ours"], r["peer"], r["ratio"], r["unit"]) for r in rows] == [
        (500.0, 400.0, 1.25, "pairs/s"), (1000.0, 400.0, 2.5, "pairs/s")]
    assert [r["max_abs_diff"] for r in rows] == [3e-7, 2e-3]
    assert rows[0]["note"] == "scores agree (max |ours - CrossEncoder| 3e-07 <= 0.0001)"
    assert rows[1]["note"] == "SCORES DIFFER (max |ours - CrossEncoder| 0.002 > 0.0001)"
    assert "ours SavedModel rank vs CrossEncoder.predict, median of 3" in rows[1]["config"]
    assert write_readme.goal_line(rows) is None
    kept = run_all._schema_rows(rows)  # pylint: disable=protected-access
    assert [r["note"] for r in kept] == [r["note"] for r in rows]  # the table shows it
    alone = bench_ranker.ranker_rows({"Predictor": [1.0]}, [], 1000, {"Predictor": None}, 1)
    assert (alone[0]["peer"], alone[0]["ratio"]) == (None, None)
    assert alone[0]["note"] == "scores not compared, no peer"
    # In `make bench` (and --full), as the embeddings group is.
    for mode in ("default", "full"):
        assert "ranker" in [item[0] for item in run_all.plan(mode, 3, 5) if item]


@pytest.mark.slow
def test_ranker_bench_quick_on_a_tiny_model(shared_dir, monkeypatch):
    """bench_ranker --quick end to end on the golden tiny model (its encoder under the
    seeded one-logit head): our Predictor and SavedModel `rank` and CrossEncoder.predict
    (the peer venv) score the same 128 pairs, within AGREEMENT of each other."""
    import bench_ranker  # pylint: disable=import-outside-toplevel
    from conftest import peer_python  # pylint: disable=import-outside-toplevel
    monkeypatch.setenv("BERT_TF2_PEER_PYTHON", peer_python())
    monkeypatch.delenv("BERT_TF2_PEERS", raising=False)
    lines = []
    rows = bench_ranker.run(quick=True, log=lines.append, max_seq_length=128,
                            model_dir=str(shared_dir / "golden" / "tf1_tiny"))
    assert [r["config"].split(" ours ")[1].split(" vs ")[0] for r in rows] == [
        "Predictor", "SavedModel rank"]
    for r in rows:
        assert r["config"].startswith("tf1_tiny + one-logit head, 128 SQuAD dev")
        assert r["ours"] > 0 and r["peer"] > 0 and r["max_abs_diff"] is not None
        assert r["max_abs_diff"] <= bench_ranker.AGREEMENT, r
        assert r["note"].startswith("scores agree (max |ours - CrossEncoder| ")
    assert any(line.startswith("peer: sentence-transformers ") for line in lines)
    # scores that tell the pairs apart: agreeing on them is not agreeing on a constant
    spreads = [float(line.rsplit(" ", 1)[1].rstrip(")")) for line in lines
               if "standard deviation" in line]
    assert len(spreads) == 2 and min(spreads) > 100 * bench_ranker.AGREEMENT, lines
