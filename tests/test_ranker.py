"""run_ranker: the cross-encoder re-ranker (issue 93 item 4), its files, losses and ranking
metrics, and rank(query, passages) at every door: run_ranker.predict() / Predictor, the
SavedModel's `rank` and serving_default signatures, LiteRT fp32, and the HuggingFace export
in transformers and in sentence-transformers' CrossEncoder (the peer venv).

The training tests train one tiny model per loss (module fixtures) on synthetic files: a
query "where is <place>" and passages that name that place and say "very good" (relevant) or
another place and "not bad" (not): a signal a two-layer model learns in a few dozen steps.
The door tests read the run's shared pointwise ranker (tests/trained.py's, which the parity
matrix trains and exports once for every file; it learnt that a passage saying "good" is
relevant, so it tells these passages apart too).
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest

import parity_helpers as ph
from conftest import FP32_ATOL, HANG_GUARD_SECONDS, REPO_ROOT, peer_python, write_text

_PLACES = ("paris", "london", "river", "city", "house", "tree", "water", "store")
_FILL = ("the man went to the", "a woman was in the", "john bought milk at the",
         "it is a big old", "mary was at the red")


def _query(place):
    return "where is the %s" % place


def _passage(place, n, good=True):
    return "%s %s %s ." % (_FILL[n % len(_FILL)], place, "very good" if good else "not bad")


def _pointwise_rows(repeats):
    rows = []
    for r in range(repeats):
        for i, place in enumerate(_PLACES):
            # As many relevant rows as not: a model that learnt only their share stays at
            # log(2), so a lower loss is one that tells a match.
            rows.append((_query(place), _passage(place, r + i), "1"))
            other = _PLACES[(i + 1 + r % (len(_PLACES) - 1)) % len(_PLACES)]
            rows.append((_query(place), _passage(other, r + 2, False), "0"))
    return rows


def _triples(repeats):
    return [(_query(place), _passage(place, r + i),
             _passage(_PLACES[(i + j) % len(_PLACES)], r + j, False))
            for r in range(repeats) for i, place in enumerate(_PLACES) for j in (1, 3, 5)]


def _tsv(path, rows):
    return write_text(path, "".join("\t".join(row) + "\n" for row in rows))


def _dev_rows():
    """Per query its positive and four negatives (other places)."""
    return [(_query(place), _passage(_PLACES[(i + j) % len(_PLACES)], j, j == 0),
             "1" if j == 0 else "0") for i, place in enumerate(_PLACES) for j in range(5)]


def _settings(files, data_dir, output_dir, **extra):
    values = dict(data_dir=str(data_dir), output_dir=str(output_dir), max_seq_length=ph.SEQ,
                  train_batch_size=8, learning_rate=3e-3, seed=1, predict_batch_size=4,
                  eval_batch_size=4, **files)
    values.update(extra)
    return values


def _train(root, loss, rows, epochs):
    import run_ranker  # pylint: disable=import-outside-toplevel
    files = ph.model_files(root)
    data = root / "data"
    _tsv(data / "train.tsv", rows)
    _tsv(data / "dev.tsv", _dev_rows())
    _tsv(data / "test.tsv", [row[:2] for row in _dev_rows()])
    result = run_ranker.run(run_ranker.Settings(**_settings(
        files, data, root / "out", loss=loss, do_train=True, do_eval=True, do_predict=True,
        num_train_epochs=epochs)))
    return {"root": root, "files": files, "data": data, "folder": str(root / "out"),
            "result": result}


@pytest.fixture(scope="module")
def pointwise(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("ranker_pointwise"), "pointwise",
                  _pointwise_rows(4), 4.0)


@pytest.fixture(scope="module")
def pairwise(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("ranker_pairwise"), "pairwise", _triples(2), 3.0)


def _scores_of_untrained(trained, rows, name):
    """test_results.tsv of `rows` scored by the model before training (the run's seed and
    config, no checkpoint: the weights it started from)."""
    import run_ranker  # pylint: disable=import-outside-toplevel
    data = trained["root"] / name
    _tsv(data / "test.tsv", rows)
    run_ranker.run(run_ranker.Settings(**_settings(
        trained["files"], data, trained["root"] / (name + "_out"), do_predict=True)))
    return _read_scores(trained["root"] / (name + "_out") / "test_results.tsv")


def _read_scores(path):
    with open(str(path), encoding="utf-8") as f:
        return [float(line) for line in f]


def _bce(scores, labels):
    s, y = np.asarray(scores, np.float64), (np.asarray(labels, np.float64) > 0)
    return float(np.mean(np.logaddexp(0, s) - y * s))


# ---------------------------------------------------------------------------
# The metrics, by hand (no TensorFlow)
# ---------------------------------------------------------------------------

def test_mrr_and_ndcg_of_a_hand_example():
    from bert_tf2.tasks import ranker_task  # pylint: disable=import-outside-toplevel
    queries = ["a", "a", "a", "b", "b", "c", "c"]
    labels = [0, 1, 2, 1, 0, 0, 0]
    scores = [0.9, 0.5, 0.1, 0.2, 0.8, 0.3, 0.4]
    found = ranker_task.ranking_metrics(queries, labels, scores)
    # a: order 0 (0), 1 (1), 2 (2): first relevant at rank 2; DCG = 1/log2(3) + 3/log2(4),
    # ideal 3/log2(2) + 1/log2(3). b: order 4 (0), 3 (1): rank 2; DCG 1/log2(3), ideal 1.
    # c: no relevant candidate: not averaged, counted.
    ndcg_a = (1 / np.log2(3) + 3 / 2.0) / (3 + 1 / np.log2(3))
    ndcg_b = 1 / np.log2(3)
    assert found["mrr"] == pytest.approx((0.5 + 0.5) / 2)
    assert found["ndcg"] == pytest.approx((ndcg_a + ndcg_b) / 2)
    assert (found["queries"], found["queries_without_relevant"]) == (2, 1)
    # The cut at 10: a relevant candidate at rank 11 gives 0 (and nothing to NDCG's DCG).
    eleven = ranker_task.ranking_metrics(["q"] * 11, [0] * 10 + [1], list(range(11, 0, -1)))
    assert eleven["mrr"] == 0.0 and eleven["ndcg"] == 0.0
    # Ties keep the file's order.
    assert ranker_task.order([1.0, 2.0, 2.0, 0.5]) == [1, 2, 0, 3]
    assert ranker_task.auc([1, 0, 1, 0], [0.9, 0.1, 0.4, 0.4]) == pytest.approx(0.875)


def test_bad_rows_are_refused_naming_file_and_line(tmp_path):
    from bert_tf2.tasks import ranker_task  # pylint: disable=import-outside-toplevel
    write_text(tmp_path / "train.tsv", "q\tp\t1\nq\tp\n")
    with pytest.raises(ValueError, match=r"train\.tsv:2: 2 tab-separated column\(s\), "
                                         r"expected 3 \(query<TAB>passage<TAB>label\)$"):
        ranker_task.read_split(tmp_path, "train", "pointwise")
    write_text(tmp_path / "train.tsv", "q\tp\t1\nq\tp\tn\n")
    with pytest.raises(ValueError, match=r"train\.tsv:2: label 'n' is not a number >= 0 .*"
                                         r"--loss=pairwise\)$"):
        ranker_task.read_split(tmp_path, "train", "pointwise")
    write_text(tmp_path / "train.tsv", "q\tp\t1\n\nq\tn\t0\n")
    with pytest.raises(ValueError, match=r"train\.tsv:1: every third column is a number: .*"
                                         r"--loss=pointwise$"):
        ranker_task.read_split(tmp_path, "train", "pairwise")
    # dev: triples become labelled rows (a passage once per query).
    write_text(tmp_path / "dev.tsv", "q\tp\tn\nq\tp\tm\n")
    assert ranker_task.read_split(tmp_path, "dev", "pointwise") == [
        ranker_task.Row("q", "p", 1.0), ranker_task.Row("q", "n", 0.0),
        ranker_task.Row("q", "m", 0.0)]


# ---------------------------------------------------------------------------
# Training (both losses) and its outputs
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_pointwise_training_lowers_its_loss_and_writes_the_results(pointwise):
    rows = _pointwise_rows(4)
    before = _bce(_scores_of_untrained(pointwise, [r[:2] for r in rows], "before"),
                  [float(r[2]) for r in rows])
    after = _bce(_folder_scores(pointwise, [r[:2] for r in rows]), [float(r[2]) for r in rows])
    assert before > 0.6 and after < 0.5 * before, (before, after)
    metrics = pointwise["result"].metrics
    assert set(metrics) == {"eval_mrr_at_10", "eval_ndcg_at_10", "eval_queries",
                            "eval_queries_without_relevant", "eval_accuracy", "eval_auc",
                            "eval_loss", "global_step"}
    assert metrics["eval_queries"] == len(_PLACES)
    with open(os.path.join(pointwise["folder"], "eval_results.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines == ["%s = %s" % (k, metrics[k]) for k in sorted(metrics)]
    # The metrics are those of the test file's scores (the same rows), computed here again.
    from bert_tf2.tasks import ranker_task  # pylint: disable=import-outside-toplevel
    scores = _read_scores(os.path.join(pointwise["folder"], "test_results.tsv"))
    dev = _dev_rows()
    assert len(scores) == len(dev)
    again = ranker_task.ranking_metrics([r[0] for r in dev], [float(r[2]) for r in dev], scores)
    assert float(metrics["eval_mrr_at_10"]) == pytest.approx(again["mrr"], abs=1e-5)
    assert float(metrics["eval_ndcg_at_10"]) == pytest.approx(again["ndcg"], abs=1e-5)
    assert float(metrics["eval_loss"]) == pytest.approx(
        _bce(scores, [float(r[2]) for r in dev]), abs=1e-4)


def _folder_scores(trained, pairs):
    import run_ranker  # pylint: disable=import-outside-toplevel
    return run_ranker.predict(trained["folder"], [p[0] for p in pairs], [p[1] for p in pairs])


@pytest.mark.slow
def test_pairwise_training_lowers_its_loss(pairwise):
    triples = _triples(2)
    pairs = [(q, p) for q, p, _ in triples] + [(q, n) for q, _, n in triples]

    def ranknet(scores):
        pos, neg = np.asarray(scores[:len(triples)]), np.asarray(scores[len(triples):])
        return float(np.mean(np.logaddexp(0, neg - pos)))

    before = ranknet(_scores_of_untrained(pairwise, pairs, "before"))
    after = ranknet(_folder_scores(pairwise, pairs))
    assert after < 0.7 * before, (before, after)
    metrics = pairwise["result"].metrics
    assert "eval_loss" not in metrics and "eval_mrr_at_10" in metrics
    assert metrics["eval_queries"] == len(_PLACES)


# ---------------------------------------------------------------------------
# rank(query, passages) at every door
# ---------------------------------------------------------------------------

_QUERY = _query("london")
_CANDIDATES = [_passage("paris", 0), _passage("london", 1), _passage("river", 2),
               "london", _passage("london", 3) + " " + _passage("tree", 4) * 4]


@pytest.fixture(scope="module")
def ranker(trained_ranker):
    """The run's shared pointwise ranker folder (tests/trained.py: the parity matrix's, trained
    once for every file): its doors are tested here, its training above on models of its own."""
    return trained_ranker.folder


@pytest.fixture(scope="module")
def exported(trained_heads):
    """The shared ranker's export (SavedModel + LiteRT fp32; made once per run)."""
    return trained_heads.exported("ranker").export_dir


@pytest.mark.slow
def test_rank_is_the_same_at_predict_the_predictor_the_saved_model_and_litert(ranker, exported):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import run_ranker  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import litert_predictor  # pylint: disable=import-outside-toplevel
    want = run_ranker.rank(ranker, _QUERY, _CANDIDATES)
    scores = [r["score"] for r in sorted(want, key=lambda r: r["index"])]
    assert [r["index"] for r in want] == list(np.argsort(-np.asarray(scores), kind="stable"))
    assert len(set(np.round(scores, 3))) > 1  # a model that tells the candidates apart
    predictor = run_ranker.Predictor(ranker)
    try:
        again = predictor.rank(_QUERY, _CANDIDATES)
        assert [(a["index"], a["passage"]) for a in again] == \
            [(b["index"], b["passage"]) for b in want]
        assert np.allclose([a["score"] for a in again], [b["score"] for b in want],
                           atol=FP32_ATOL)
        assert np.allclose(predictor.predict(_QUERY, _CANDIDATES), scores, atol=FP32_ATOL)
        assert predictor.predict([], []) == []
        with pytest.raises(ValueError, match=r"^2 queries but 1 passages"):
            predictor.predict(["a", "b"], ["c"])
    finally:
        predictor.close()
    saved = tf.saved_model.load(exported)
    ranked = saved.signatures["rank"](query=tf.constant([_QUERY, _QUERY]),
                                      passages=tf.constant([_CANDIDATES, _CANDIDATES[::-1]]))
    logits = ranked["logits"].numpy()
    np.testing.assert_allclose(logits[0], scores, atol=FP32_ATOL)
    np.testing.assert_allclose(logits[1], scores[::-1], atol=FP32_ATOL)
    assert int(ranked["predicted_choice"].numpy()[0]) == want[0]["index"]
    pair = saved.signatures["serving_default"](text_a=tf.constant([_QUERY] * len(_CANDIDATES)),
                                               text_b=tf.constant(_CANDIDATES))
    np.testing.assert_allclose(pair["logits"].numpy(), scores, atol=FP32_ATOL)
    lite = litert_predictor.LiteRTPredictor(exported, "fp32")
    try:
        found = lite.predict([_QUERY] * len(_CANDIDATES), _CANDIDATES)
    finally:
        lite.close()
    np.testing.assert_allclose(found, scores, atol=FP32_ATOL)
    from bert_tf2.tasks import ranker_task  # pylint: disable=import-outside-toplevel
    assert [r["index"] for r in ranker_task.ranked(_CANDIDATES, found)] == \
        [r["index"] for r in want]
    with open(os.path.join(exported, "assets.extra", "export_info.json"),
              encoding="utf-8") as f:
        info = json.load(f)
    assert info["model_type"] == "ranker" and "rank" in info["signatures"]


@pytest.mark.slow
def test_a_warmup_file_replays_the_rank_signature(ranker, tmp_path):
    """export_saved_model --warmup_file of a ranker: each line's requests of serving_default,
    serving_text_a and the room's own `rank` (the query with its passage as the one
    candidate) in assets.extra/tf_serving_warmup_requests, each scoring as run_ranker."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import export_saved_model  # pylint: disable=import-outside-toplevel
    import run_ranker  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import warmup  # pylint: disable=import-outside-toplevel
    lines = write_text(tmp_path / "warmup.txt", "%s\t%s\n%s\t%s\n" % (
        _QUERY, _CANDIDATES[1], _QUERY, _CANDIDATES[0]))
    export_dir = str(tmp_path / "export")
    export_saved_model.run(export_saved_model.Settings(
        init_checkpoint=ranker, export_dir=export_dir, warmup_file=lines))
    requests = warmup.read_requests(os.path.join(export_dir, warmup.WARMUP_FILE))
    assert [r[1] for r in requests] == ["serving_default", "serving_text_a", "rank"] * 2
    ranked = [inputs for _, name, inputs in requests if name == "rank"]
    assert [r["query"].tolist() for r in ranked] == [[_QUERY.encode("utf-8")]] * 2
    assert [r["passages"].tolist() for r in ranked] == [[[_CANDIDATES[1].encode("utf-8")]],
                                                        [[_CANDIDATES[0].encode("utf-8")]]]
    saved = tf.saved_model.load(export_dir)
    found = [float(saved.signatures["rank"](**{k: tf.constant(v) for k, v in r.items()})[
        "logits"].numpy()[0, 0]) for r in ranked]
    np.testing.assert_allclose(found, run_ranker.predict(ranker, _QUERY, _CANDIDATES[1::-1]),
                               atol=FP32_ATOL)


_PEER = r"""
import json, sys, torch, transformers
from sentence_transformers import CrossEncoder
request = json.load(open(sys.argv[1]))
folder, pairs = request["dir"], request["pairs"]
tok = transformers.AutoTokenizer.from_pretrained(folder)
model = transformers.BertForSequenceClassification.from_pretrained(folder).eval()
with torch.no_grad():
    batch = tok([q for q, _ in pairs], [p for _, p in pairs], padding=True, truncation=True,
                max_length=request["max_length"], return_tensors="pt")
    logits = model(**batch).logits[:, 0].tolist()
cross = CrossEncoder(folder, max_length=request["max_length"], device="cpu")
raw = cross.predict(pairs, activation_fn=torch.nn.Identity()).tolist()
default = cross.predict(pairs).tolist()
ranks = cross.rank(pairs[0][0], [p for _, p in pairs], activation_fn=torch.nn.Identity())
json.dump({"class": model.config.architectures[0], "num_labels": model.config.num_labels,
           "logits": logits, "cross_encoder": raw, "default": default,
           "rank": [[int(r["corpus_id"]), float(r["score"])] for r in ranks]},
          open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module")
def hf_folder(ranker, tmp_path_factory):
    """convert_hf_checkpoint --direction=to_hf of the shared ranker folder, without --model_type:
    the folder's own type (run_ranker's), not the classifier its variables look like."""
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    out = str(tmp_path_factory.mktemp("ranker_hf") / "hf")
    convert_hf_checkpoint.run(convert_hf_checkpoint.Settings(
        direction="to_hf", init_checkpoint=ranker, output_dir=out))
    return out


def _peer(script, request, tmp_path):
    """Runs `script` in the peer venv with request.json and answer.json; the answer."""
    python = peer_python()
    request = write_text(tmp_path / "request.json", json.dumps(request))
    answer = str(tmp_path / "answer.json")
    subprocess.run([python, "-c", script, request, answer], check=True,
                   timeout=HANG_GUARD_SECONDS,
                   env=dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1"))
    with open(answer, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.slow
def test_the_hf_export_scores_as_ours_in_transformers_and_cross_encoder(ranker, hf_folder,
                                                                        tmp_path):
    import run_ranker  # pylint: disable=import-outside-toplevel
    out = hf_folder
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["architectures"] == ["BertForSequenceClassification"]
    scores = run_ranker.predict(ranker, _QUERY, _CANDIDATES)
    found = _peer(_PEER, {"dir": out, "max_length": ph.SEQ,
                          "pairs": [[_QUERY, p] for p in _CANDIDATES]}, tmp_path)
    assert (found["class"], found["num_labels"]) == ("BertForSequenceClassification", 1)
    np.testing.assert_allclose(found["logits"], scores, atol=FP32_ATOL)
    np.testing.assert_allclose(found["cross_encoder"], scores, atol=FP32_ATOL)
    # CrossEncoder's default for one label: the sigmoid of the score.
    np.testing.assert_allclose(found["default"], 1 / (1 + np.exp(-np.asarray(scores))),
                               atol=1e-4)
    want = run_ranker.rank(ranker, _QUERY, _CANDIDATES)
    assert [i for i, _ in found["rank"]] == [r["index"] for r in want]


# ---------------------------------------------------------------------------
# docs/ranker.md's Python blocks (claimed there by this file)
# ---------------------------------------------------------------------------

def _docs_blocks():
    """docs/ranker.md's Python blocks that name this file as the test running them."""
    text = (REPO_ROOT / "docs" / "ranker.md").read_text(encoding="utf-8")
    return re.findall(r"^<!-- run by tests/test_ranker\.py -->\n```python\n(.*?)^```", text,
                      flags=re.M | re.S)


def _with_paths(block, folder, exported, hf):
    for placeholder, path in (("/tmp/ranker_export", exported), ("/tmp/ranker_hf", hf),
                              ("/tmp/ranker", folder)):
        block = block.replace('"%s"' % placeholder, json.dumps(path))
    return block


@pytest.mark.slow
def test_the_docs_python_blocks_run_and_agree(ranker, exported, hf_folder, tmp_path):
    import run_ranker  # pylint: disable=import-outside-toplevel
    blocks = _docs_blocks()
    assert len(blocks) == 4
    passages = ["a puppet on television", "a language model"]
    want = run_ranker.predict(ranker, "what is bert", passages)
    order = [i for i in np.argsort(-np.asarray(want), kind="stable")]
    found = {}
    for block in blocks:
        code = _with_paths(block, ranker, exported, hf_folder)
        if "sentence_transformers" in code:
            script = (code + "\nimport json, sys\njson.dump({'logits': [float(x) for x in "
                      "logits], 'hits': [int(h['corpus_id']) for h in hits]}, "
                      "open(sys.argv[2], 'w'))\n")
            found["cross"] = _peer(script, {}, tmp_path)
            continue
        namespace = {}
        exec(compile(code, "docs/ranker.md", "exec"), namespace)  # pylint: disable=exec-used
        found.update({key: namespace[key] for key in ("scores", "out", "hits")
                      if key in namespace})
    np.testing.assert_allclose(run_ranker.predict(ranker, "what is bert", passages[::-1]),
                               found["scores"], atol=FP32_ATOL)
    np.testing.assert_allclose(found["out"]["logits"].numpy()[0], want, atol=FP32_ATOL)
    assert [h["index"] for h in found["hits"]] == order
    np.testing.assert_allclose(found["cross"]["logits"], [want[1]], atol=FP32_ATOL)
    assert found["cross"]["hits"] == order
