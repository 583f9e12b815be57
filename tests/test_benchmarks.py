"""The benchmark scripts work (tiny models, no timing assertions) and count FLOPs right."""
import os
import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(1, os.path.join(str(REPO_ROOT), "benchmarks"))

import bench_util  # noqa: E402  pylint: disable=wrong-import-position
import run_all  # noqa: E402  pylint: disable=wrong-import-position

SCHEMA = {"measure", "config", "ours", "peer", "unit", "ratio"}


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
    assert run_all.tokenization_rows(ready) == [{k: ready[0][k] for k in SCHEMA}]
    assert [name for name, _ in run_all.plan("quick", 1, 1)] == [
        "pretraining", "inference", "optimizer", "memory", "tokenization",
        "create_pretraining_data"]


def test_missing_data_benchmark_is_a_note(monkeypatch):
    monkeypatch.setattr(run_all, "_load", lambda name: None)
    notes = []
    assert run_all.run_data_benchmark("tokenization", {}, run_all.tokenization_rows,
                                      notes) == []
    assert "skipped" in notes[0]


@pytest.mark.slow
def test_model_benchmarks_run_in_quick_mode():
    import inference
    import memory
    import optimizer
    import pretraining
    rows = (pretraining.run(quick=True, log=None) + inference.run(quick=True, log=None)
            + optimizer.run(quick=True, log=None) + memory.run(quick=True, log=None))
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
    rows = {r["variant"].split(" (")[0].split(",")[0]: r for r in optimizer.kernel_counts("tiny")}
    op_by_op = rows["TF1 op by op"]
    device = next(r for name, r in rows.items() if "one XLA call per device" in r["variant"])
    # The op-by-op update runs TF ops only; one fused computation holds all of the device's.
    assert op_by_op["xla_launches"] == 0 and op_by_op["compute_ops"] > 10 * device["compute_ops"]
    assert device["xla_launches"] == 1 and device["hlo_kernels"] >= device["hlo_fusions"] > 0
    print(optimizer.format_kernel_table("tiny", list(rows.values())))
