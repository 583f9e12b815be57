"""export_saved_model --openvino / --onnx (issue 92): the numeric ids-in graph every ids-in
door shares on OpenVINO and ONNX Runtime, their reports, OpenVINOPredictor and
ONNXPredictor, and the one-line refusals.

The answers of every head through both fp32 doors against do_predict are the parity
matrix's (tests/test_parity_matrix*.py, doors "openvino" and "onnx"); here the raw outputs
against the SavedModel's serving_ids (the fp32 bound, and the figures printed), the bf16
and int8 variants' agreement reports, the files under --export_dir and --export_base, and
what is refused. The run's shared trained heads (tests/trained.py) are the models.
"""
import importlib.util
import json
import os

import numpy as np
import pytest

import parity_helpers as ph
from conftest import FP32_ATOL, REQUIRE_DOORS, write_text

_EXTRAS = (("openvino", "nncf"), ("onnxruntime", "onnx", "tf2onnx"))
if not REQUIRE_DOORS:  # make test installs [openvino] and [onnx]: there they must run
    for _names in _EXTRAS:
        for _name in _names:
            pytest.importorskip(_name, reason="the [openvino] / [onnx] extras are missing")

from bert_tf2.export import head_types  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf2.export import native_steps  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf2.export import onnx_predictor  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf2.export import openvino_predictor  # noqa: E402  pylint: disable=wrong-import-position

DOORS = {"openvino": openvino_predictor.OpenVINOPredictor,
         "onnx": onnx_predictor.ONNXPredictor}
# The parity matrix's heads LiteRT (hence every ids-in door) takes, from the registry.
SERVED = tuple(name for name, head in ph.head_classes().items()
               if head_types.find(head.model_type).carries_litert(head.registry_head))


def _ids_batch(head, predictor):
    """The predictor's id features of every kind of the head's inputs it takes."""
    items = []
    for kind in ph.KINDS:
        try:
            _call_batch(predictor, head.kinds[kind])
        except ValueError:  # a kind do_predict refuses too (empty questions, ...)
            continue
        items.extend(head.kinds[kind])
    return _call_batch(predictor, items)


def _call_batch(predictor, items):
    """batch() of the items as the head's predict() takes them: pairs (squad's question and
    context, the ranker's query and passage) as two lists."""
    if items and isinstance(items[0], (tuple, list)):
        return predictor.batch([a for a, _ in items], [b for _, b in items])
    return predictor.batch(list(items))


@pytest.mark.slow
@pytest.mark.parametrize("name", SERVED)
@pytest.mark.parametrize("door", sorted(DOORS))
def test_fp32_outputs_are_the_saved_models(trained_heads, name, door):
    """Every servable head's numeric outputs through OpenVINO fp32 (INFERENCE_PRECISION_HINT
    f32, on a CPU that would pick bf16) and ONNX Runtime fp32 equal the SavedModel's
    serving_ids outputs on all the parity matrix's inputs, within the fp32 bound (per-token
    outputs at the real tokens: serving_ids skips the padding's work, its values there are
    nobody's)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    head = trained_heads.exported(name)
    predictor = DOORS[door](head.export_dir, "fp32")
    features = _ids_batch(head, predictor).features
    got = predictor.run(features)
    saved = head.saved_model().signatures["serving_ids"]
    want = saved(**{k: tf.constant(v) for k, v in features.items()})
    names = sorted(set(got) & set(want))
    assert names and len(features["input_ids"]) > 4, (names, len(features["input_ids"]))
    real = features["input_mask"].astype(bool)  # serving_ids skips the padding's work

    def values(array):
        array = np.asarray(array, np.float64)
        return array[real] if array.shape[:2] == real.shape else array

    worst = max(float(np.max(np.abs(values(got[n]) - values(want[n].numpy()))))
                for n in names)
    print("%s %s fp32: max |delta| %.3g over %s (%d rows)"
          % (name, door, worst, ", ".join(names), len(features["input_ids"])))
    assert worst <= FP32_ATOL, (name, door, worst)
    if door == "openvino":
        assert predictor.run.precision == "f32"


def _command_line(**flags):
    """export_saved_model run as from its command line (messages spell flags as flags)."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    from bert_tf2 import flags_common  # pylint: disable=import-outside-toplevel
    return export_saved_model.run(flags_common.parse_flags(
        export_saved_model.define_flags, ["--%s=%s" % item for item in flags.items()]))


def _classifier_file(head, path):
    """A TSV (text, label) of the classifier head's inputs, labelled with do_predict's
    answers: agreement and accuracy against the SavedModel are both meaningful."""
    rows = ["text\tlabel\n"]
    for kind in ph.KINDS:
        if isinstance(head.reference[kind], ph.Refused):
            continue
        for text, answer in zip(head.kinds[kind], head.reference[kind]):
            if text.strip() and "\t" not in text and "\n" not in text:
                rows.append("%s\t%s\n" % (text, answer["label"]))
    return write_text(path, "".join(rows))


@pytest.fixture(scope="module")
def all_variants(trained_classifier, tmp_path_factory):
    """The trained classifier exported with every OpenVINO and ONNX variant, its int8 over
    an impossible bound (--max_metric_drop=-1: each variant warns, int8 is written under
    its over-bound name); (export folder, result, calls). Converted in this process
    (native_steps.IN_PROCESS) with every call into the runtimes' C++ code noted in `calls`
    as (name, the native step under way): test_every_native_call_runs_in_a_named_step's.
    The child process itself carries OpenVINO's and ONNX's models in
    test_a_tf_serving_versions_files_go_beside_it_with_a_model_repository."""
    import nncf  # pylint: disable=import-outside-toplevel
    import openvino  # pylint: disable=import-outside-toplevel
    import tf2onnx  # pylint: disable=import-outside-toplevel
    from onnxruntime import quantization  # pylint: disable=import-outside-toplevel
    import export_saved_model  # pylint: disable=import-outside-toplevel
    root = tmp_path_factory.mktemp("ov_onnx")
    data = _classifier_file(trained_classifier, root / "dev.tsv")
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_steps, "IN_PROCESS", True)
        for owner, name in ((openvino, "convert_model"), (openvino, "save_model"),
                            (nncf, "quantize"), (tf2onnx.convert, "from_graph_def"),
                            (quantization, "quantize_dynamic"),
                            (quantization, "quantize_static"),
                            (openvino_predictor.ModelRunner, "__init__"),
                            (openvino_predictor.ModelRunner, "__call__"),
                            (onnx_predictor.ModelRunner, "__init__"),
                            (onnx_predictor.ModelRunner, "__call__")):
            patch.setattr(owner, name, _noted(calls, name, getattr(owner, name)))
        result = export_saved_model.run(export_saved_model.Settings(
            init_checkpoint=trained_classifier.folder, model_type="classifier",
            export_dir=str(root / "export"), openvino="fp32,bf16,int8", onnx="fp32,int8",
            calibration_file=data, agreement_file=data, calibration_examples=16,
            max_metric_drop=-1.0))
    return root / "export", result, calls


def _noted(calls, name, real):
    """`real`, noting (name, native_steps.current()) in `calls` at each call."""
    def call(*args, **kwargs):
        calls.append((name, native_steps.current()))
        return real(*args, **kwargs)
    return call


@pytest.mark.slow
def test_bf16_and_int8_variants_report_their_agreement(all_variants):
    export_dir, result, _ = all_variants
    for door, variants, over in (("openvino", ("fp32", "bf16", "int8"),
                                  openvino_predictor.OVER_BOUND_FILE),
                                 ("onnx", ("fp32", "int8"), onnx_predictor.OVER_BOUND_FILE)):
        with open(result.outputs[door + "_report"], encoding="utf-8") as f:
            report = json.load(f)
        assert report["model_type"] == "classifier" and report["max_metric_drop"] == -1.0
        for variant in variants:
            entry = report["variants"][variant]
            r = entry["results"]["agreement"]
            assert {"examples", "agreement", "max_abs_delta", "mean_abs_delta", "metric",
                    "metric_fp32", "metric_name"} <= set(r), (door, variant, r)
            assert entry["bytes"] > 1000 and entry["recipe"], entry
            print("%s %s: agreement %.4f, max |delta| %.3g, accuracy %.2f (SavedModel %.2f) "
                  "[%s]" % (door, variant, r["agreement"], r["max_abs_delta"], r["metric"],
                            r["metric_fp32"], entry["recipe"]))
            if variant == "fp32":
                assert r["agreement"] == 1.0 and r["max_abs_delta"] <= FP32_ATOL
            else:  # near the SavedModel, not equal to it
                assert r["agreement"] >= 0.75 and r["max_abs_delta"] < 0.25, (door, variant, r)
        # Every variant "warns" under a negative bound; only int8 changes its name.
        assert len(report["warnings"]) == len(variants)
        assert report["variants"]["int8"]["file"] == over
        assert os.path.isfile(os.path.join(str(export_dir), over))
        assert len(report["variants"]["int8"]["tried"]) == 2
        assert not os.path.exists(os.path.join(str(export_dir), DOORS[door].model_file("int8")))
        with pytest.raises(ValueError, match=r"^\S+ does not exist: the export's int8 model "
                                             r"lost more than its --max_metric_drop") as e:
            DOORS[door](str(export_dir), "int8")
        assert "\n" not in str(e.value)
    bf16 = json.load(open(result.outputs["openvino_report"]))["variants"]["bf16"]
    assert bf16["file"] == openvino_predictor.model_file("fp32")
    cpu_flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if "avx512_bf16" in cpu_flags or "amx_bf16" in cpu_flags:
        assert bf16["inference_precision"] == "bf16"


@pytest.mark.slow
def test_every_variant_predicts_as_the_saved_model(all_variants, trained_classifier):
    """fp32 gives the SavedModel's probabilities; bf16 and OpenVINO's int8 (its IR read as
    kept) their labels where the SavedModel's are no near ties."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    export_dir = str(all_variants[0])
    texts = [t for kind in ("short", "unicode", "mixed") for t in trained_classifier.kinds[kind]]
    saved = tf.saved_model.load(export_dir).signatures["serving_text_a"]
    want = saved(text_a=tf.constant(texts))["probabilities"].numpy()
    labels = trained_classifier.predictor().predict(texts)
    order = list(labels[0]["probabilities"])
    for door, variant in (("openvino", "fp32"), ("onnx", "fp32"), ("openvino", "bf16")):
        got = DOORS[door](export_dir, variant).predict(texts)
        probabilities = np.array([[row["probabilities"][k] for k in order] for row in got])
        if variant == "fp32":
            np.testing.assert_allclose(probabilities, want, atol=FP32_ATOL)
            assert [r["label"] for r in got] == [r["label"] for r in labels]
        else:
            clear = np.sort(want, axis=-1)[:, -1] - np.sort(want, axis=-1)[:, -2] > 0.05
            same = probabilities.argmax(-1) == want.argmax(-1)
            assert same[clear].all(), (door, variant)


@pytest.mark.slow
@pytest.mark.parametrize("flag, extra, package", [
    ("openvino", "openvino", "openvino"), ("openvino", "openvino", "nncf"),
    ("onnx", "onnx", "onnxruntime"), ("onnx", "onnx", "tf2onnx")])
def test_a_missing_extra_is_one_line_before_any_work(trained_classifier, tmp_path,
                                                     monkeypatch, flag, extra, package):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == package else real(name, *a))
    with pytest.raises(ValueError) as e:
        _command_line(init_checkpoint=trained_classifier.folder, model_type="classifier",
                      export_dir=str(tmp_path / "export"), **{flag: "fp32"})
    assert str(e.value) == ("--%s needs the %s package: pip install 'bert-tf2[%s]' (or pip "
                            "install %s)" % (flag, package, extra, package))
    assert not os.path.exists(str(tmp_path / "export"))
    # The predictor's own check: the runtime package alone.
    runner = {"openvino": openvino_predictor.ModelRunner,
              "onnxruntime": onnx_predictor.ModelRunner}.get(package)
    if runner is not None:
        with pytest.raises(ValueError, match=r"needs the %s package: pip install "
                                             r"'bert-tf2\[%s\]'" % (package, extra)):
            runner(str(tmp_path / "missing.model"))


@pytest.mark.slow
def test_heads_variants_and_files_the_runtimes_cannot_take_are_refused(
        trained_classifier, trained_multilabel, trained_multiple_choice, tmp_path):
    """One line each, before any work, nothing left: a head no ids-in door takes, a
    multi-label classifier, an unknown variant, int8 without calibration examples, a
    calibration file that does not exist, and the flags of the report without a runtime."""
    out = str(tmp_path / "export")
    cases = [
        (trained_multiple_choice, {"openvino": "fp32"},
         r"^--openvino: --model_type=multiple_choice is not supported \("),
        (trained_multilabel, {"onnx": "fp32"},
         r"^--onnx: multi-label classifiers and --long_text=head_tail / windows are not "),
        (trained_classifier, {"openvino": "fp16"},
         r"^--openvino=fp16: expected a comma-separated list of fp32, bf16, int8$"),
        (trained_classifier, {"onnx": "fp32,bf16"},
         r"^--onnx=fp32,bf16: expected a comma-separated list of fp32, int8$"),
        (trained_classifier, {"onnx": "int8"}, r"^--onnx=int8 needs --calibration_file "),
        (trained_classifier, {"openvino": "fp32", "calibration_file": str(tmp_path / "no")},
         r"^--calibration_file=\S+ does not exist"),
        (trained_classifier, {"agreement_file": str(tmp_path / "no")},
         r"--agreement_file.*without --litert, --openvino or --onnx"),
    ]
    for head, given, message in cases:
        with pytest.raises(ValueError, match=message) as e:
            _command_line(init_checkpoint=head.folder, model_type=head.model_type,
                          export_dir=out, **given)
        assert "\n" not in str(e.value)
        assert not os.path.exists(out)


@pytest.mark.slow
def test_a_tf_serving_versions_files_go_beside_it_with_a_model_repository(
        trained_classifier, tmp_path):
    """--export_base: the SavedModel in BASE/1 (what TF Serving reads), OpenVINO's and
    ONNX's files in BASE/1.openvino and BASE/1.onnx with the vocabulary and
    export_info.json, a model repository inside each (OpenVINO Model Server / Triton:
    <door>_repository/<model>-<variant>/config.pbtxt and 1/model.xml or model.onnx); the
    predictors read the version; the next export takes version 2."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    base = tmp_path / "sst"
    for version in (1, 2):
        result = export_saved_model.run(export_saved_model.Settings(
            init_checkpoint=trained_classifier.folder, model_type="classifier",
            export_base=str(base), openvino="fp32", onnx="fp32"))
        assert result.output_dir == str(base / str(version))
    assert sorted(os.listdir(str(base))) == ["1", "1.onnx", "1.openvino", "2", "2.onnx",
                                             "2.openvino"]
    assert not [n for n in os.listdir(str(base / "1")) if n in ("openvino", "onnx")]
    for door, model in (("openvino", "model.xml"), ("onnx", "model.onnx")):
        side = base / ("1." + door)
        for name in ("assets/vocab.txt", "assets.extra/export_info.json",
                     door + "_report.json", DOORS[door].model_file("fp32")):
            assert (side / name).is_file(), (door, name)
        repository = side / (door + "_repository") / "sst-fp32"
        assert (repository / "1" / model).is_file()
        assert (repository / "1" / model).read_bytes() == (
            side / DOORS[door].model_file("fp32")).read_bytes()
        config = (repository / "config.pbtxt").read_text()
        assert 'name: "sst-fp32"' in config and "input_ids" in config
        assert result.outputs[door + "_fp32"] == str(
            base / ("2." + door) / DOORS[door].model_file("fp32"))
        got = DOORS[door](str(base / "1"), "fp32").predict(["a good film"])
        assert got == DOORS[door](str(side), "fp32").predict(["a good film"])


@pytest.mark.slow
def test_every_native_call_runs_in_a_named_step(all_variants):
    """Every call into OpenVINO's, NNCF's, tf2onnx's and ONNX Runtime's C++ code is made
    inside a native_steps.step of its flag (the work runs in the spawned child; all_variants
    ran it in this process, to see the calls)."""
    export_dir, _, calls = all_variants
    outside = [name for name, where in calls if where is None]
    assert not outside, outside
    steps = {where for _, where in calls}
    for flag in ("--openvino", "--onnx"):
        assert set(native_steps.STEPS_BY_FLAG[flag]) <= {name for name, _ in steps}, flag
    assert {v for name, v in steps if name == "ov_evaluate"} == {"fp32", "bf16", "int8"}
    assert {v for name, v in steps if name == "onnx_evaluate"} == {"fp32", "int8"}
    assert {name for name, _ in calls} >= {"convert_model", "quantize", "from_graph_def",
                                           "__call__"}
    assert not [n for n in os.listdir(str(export_dir))
                if "litert_ids" in n or n.startswith(".")]


@pytest.mark.slow
def test_the_docs_python_example_runs(all_variants, capsys):
    """docs/openvino-onnx.md's predictor block, on this export (its path in place of
    /tmp/sst2_export): both doors print each text's label."""
    import re  # pylint: disable=import-outside-toplevel
    from conftest import REPO_ROOT  # pylint: disable=import-outside-toplevel
    page = (REPO_ROOT / "docs" / "openvino-onnx.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S)
                if b.startswith("from bert_tf2.export.openvino_predictor import")]
    exec(compile(block.replace("/tmp/sst2_export", str(all_variants[0])),  # pylint: disable=exec-used
                 "docs/openvino-onnx.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[0].startswith("OpenVINOPredictor a gripping , funny film -> ")
    assert lines[2].startswith("ONNXPredictor ")


@pytest.mark.slow
def test_onnx_conversion_gives_tf2onnx_the_weights_as_inputs(tmp_path, monkeypatch):
    """--onnx of BERT-Base was killed by the OOM killer (issue 92: the conversion child
    past 20 GB, tf2onnx's passes copying its frozen 435 MB of constants many times): the
    GraphDef tf2onnx gets holds no floating-point constant of WEIGHT_MIN_SIZE values or
    more, those weights come back as the ONNX model's initializers (the ids its only
    inputs: a captured tensor, as a --crf tagger's, included), and its outputs are the
    SavedModel's. On a small graph: a variable embedding table and kernel, a small bias, a
    large and a small captured tensor."""
    import onnx  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tf2onnx  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import ids_export  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import onnx_export  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(0)
    table = tf.Variable(0.1 * rng.randn(1000, 16).astype(np.float32))
    kernel = tf.Variable(0.1 * rng.randn(16, 512).astype(np.float32))
    bias = tf.Variable(0.1 * rng.randn(512).astype(np.float32))
    captured = tf.constant(0.1 * rng.randn(512, 16).astype(np.float32))
    small = tf.constant(0.1 * rng.randn(16).astype(np.float32))
    specs = [tf.TensorSpec([None, 8], tf.int32, name=k) for k in ("input_ids", "input_mask",
                                                                 "segment_ids")]

    def ids(input_ids, input_mask, segment_ids):
        hidden = tf.gather(table, input_ids + segment_ids)
        hidden *= tf.cast(input_mask, tf.float32)[:, :, None]
        wide = tf.nn.relu(tf.matmul(hidden, kernel) + bias)
        return {"scores": tf.matmul(wide, captured) + small, "wide": wide}

    function = tf.function(ids, input_signature=specs, autograph=False).get_concrete_function()
    ids_dir = str(tmp_path / "ids")
    tf.saved_model.save(ids_export.variables_owner(function), ids_dir,
                        signatures={"serving_default": function})
    given = []
    convert = tf2onnx.convert.from_graph_def

    def spy(graph_def, **kwargs):
        given.append([(n.name, n.attr["value"].tensor) for n in graph_def.node
                      if n.op == "Const"])
        return convert(graph_def, **kwargs)

    monkeypatch.setattr(tf2onnx.convert, "from_graph_def", spy)
    model = onnx.load_from_string(onnx_export._convert(ids_dir))  # pylint: disable=protected-access
    large = [name for name, tensor in given[0]
             if tf.dtypes.as_dtype(tensor.dtype).is_floating
             and np.prod([d.size for d in tensor.tensor_shape.dim]) >= onnx_export.WEIGHT_MIN_SIZE]
    assert not large
    assert sorted(v.name for v in model.graph.input) == ["input_ids", "input_mask",
                                                         "segment_ids"]
    sizes = sorted(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert [s for s in sizes if s >= onnx_export.WEIGHT_MIN_SIZE] == [8192, 8192, 16000]
    row = {"input_ids": rng.randint(0, 500, [3, 8]).astype(np.int32),
           "input_mask": (rng.rand(3, 8) > 0.3).astype(np.int32),
           "segment_ids": rng.randint(0, 2, [3, 8]).astype(np.int32)}
    got = onnx_predictor.ModelRunner(model.SerializeToString())(row)
    want = function(**{k: tf.constant(v) for k, v in row.items()})
    for name in ("scores", "wide"):
        delta = np.abs(got[name] - want[name].numpy()).max()
        print("%s: max |delta| %.3g" % (name, delta))
        assert delta <= FP32_ATOL


def test_missing_packages_are_named_in_one_line_with_their_extra(monkeypatch):
    """ids_predictor.check_packages, every runtime door's and export's rule: nothing when all
    are there; else one line naming each missing package (pip's spelling) and the extra."""
    from bert_tf2.export import ids_predictor  # pylint: disable=import-outside-toplevel
    ids_predictor.check_packages("--x", "x", ("json", "os"))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("ai_edge_litert", "nncf") else object())
    with pytest.raises(ValueError) as e:
        ids_predictor.check_packages("--litert", "litert", ("json", "ai_edge_litert", "nncf"))
    assert str(e.value) == ("--litert needs the ai-edge-litert, nncf packages: pip install "
                            "'bert-tf2[litert]' (or pip install ai-edge-litert nncf)")
