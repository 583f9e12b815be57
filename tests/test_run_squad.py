"""run_squad.py: reading, windows, answer spans, post-processing, metrics, end to end."""
import json
import math
import os

import numpy as np
import pytest

import modeling
import run_squad
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import input_pipeline
from bert_tf2.tasks import squad_data
from bert_tf2.tasks import squad_results
from bert_tf2.tasks import squad_task

# A vocabulary small enough to know every WordPiece split by heart.
WORDS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "man", "went", "to", "store", "and", "bought", "a", "gallon", "of", "milk",
    "who", "what", "leader", "was", "john", "smith", "(", ")", "-", ".", "1895", "1943",
    "japanese", "japan", "electronics", "industry", "is", "##s", "steve", "'", "s", "house",
    "cafe", "year", "born", "?", ",",
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def squad_file(path, paragraphs, version="1.1"):
    """Writes a one-article SQuAD file; paragraphs = [(context, [qa dicts])]."""
    data = {"version": version, "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas} for context, qas in paragraphs]}]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def qa(qid, question, answer=None, context=None, impossible=None, start=None):
    """A qa dict; the answer offset is looked up in `context` unless `start` is given."""
    out = {"id": qid, "question": question, "answers": []}
    if answer is not None:
        offset = context.index(answer) if start is None else start
        out["answers"] = [{"text": answer, "answer_start": offset}]
    if impossible is not None:
        out["is_impossible"] = impossible
    return out


def convert(examples, tokenizer, max_seq_length, doc_stride, max_query_length=64,
            is_training=False):
    features = []
    run_squad.convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                           max_query_length, is_training, features.append)
    return features


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

STORE = "the man went to the Store and bought a gallon of milk"


def test_paragraph_split_into_words_with_char_offsets():
    words, char_to_word = squad_data.split_paragraph(" ab  c\u202fd\te\n")
    assert words == ["ab", "c", "d", "e"]
    assert char_to_word == [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3]


def test_read_training_examples(tmp_path):
    path = squad_file(tmp_path / "train.json", [
        (STORE, [qa("q1", "who bought milk?", "bought a gallon", STORE),
                 qa("q2", "what?", "Store", STORE)]),
        ("The leader was John Smith (1895-1943).",
         [qa("q3", "year?", "1895", "The leader was John Smith (1895-1943).")]),
    ])
    examples = run_squad.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["q1", "q2", "q3"]
    assert (examples[0].start_position, examples[0].end_position) == (7, 9)
    assert examples[0].orig_answer_text == "bought a gallon"
    assert (examples[1].start_position, examples[1].end_position) == (5, 5)
    assert examples[2].doc_tokens[5] == "(1895-1943)."
    assert (examples[2].start_position, examples[2].end_position) == (5, 5)
    assert examples[0].doc_tokens is examples[1].doc_tokens  # one list per paragraph
    # The original's repr shows the answer fields only for a non-zero start.
    assert "start_position: 7, end_position: 9, is_impossible: False" in repr(examples[0])
    assert "start_position" not in repr(run_squad.SquadExample("x", "q", ["a"], "a", 0, 0))


def test_unrecoverable_training_answer_is_skipped_with_warning(tmp_path, caplog):
    context = "the Japanese electronics industry"
    path = squad_file(tmp_path / "train.json", [(context, [
        qa("sub", "who?", "Japan", context),                      # sub-word: kept
        qa("bad", "who?", "Japan", context, start=context.index("electronics")),
    ])])
    examples = run_squad.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["sub"]
    assert any("bad" in r.getMessage() and "Could not find answer" in r.getMessage()
               for r in caplog.records)


def test_prediction_examples_ignore_answers(tmp_path):
    path = squad_file(tmp_path / "dev.json", [(STORE, [
        {"id": "q1", "question": "who?"},                           # no answers at all
        {"id": "q2", "question": "who?", "answers": [{"text": "x", "answer_start": 999}]},
    ])])
    examples = run_squad.read_squad_examples(path, is_training=False)
    assert [(e.qas_id, e.start_position, e.is_impossible) for e in examples] == [
        ("q1", None, False), ("q2", None, False)]


def test_version_2_training_examples(tmp_path):
    path = squad_file(tmp_path / "train.json", [(STORE, [
        qa("yes", "who?", "milk", STORE, impossible=False),
        qa("no", "who?", None, STORE, impossible=True),
    ])], version="v2.0")
    examples = run_squad.read_squad_examples(path, True, version_2_with_negative=True)
    assert [(e.is_impossible, e.start_position, e.end_position, e.orig_answer_text)
            for e in examples] == [(False, 11, 11, "milk"), (True, -1, -1, "")]
    # Without the 2.0 flag an unanswerable question is a malformed training example.
    with pytest.raises(ValueError, match="no.*exactly 1 answer"):
        run_squad.read_squad_examples(path, True)


@pytest.mark.parametrize("mutate, message", [
    (lambda q: q["answers"][0].update(answer_start=60), "q1.*outside its context"),
    (lambda q: q["answers"][0].update(answer_start=-3), "q1.*outside its context"),
    (lambda q: q["answers"][0].pop("text"), "q1.*missing key 'text'"),
    (lambda q: q["answers"][0].update(text=""), "q1.*empty"),
    (lambda q: q.pop("question"), "q1.*missing key 'question'"),
    (lambda q: q["answers"].append(dict(q["answers"][0])), "q1.*exactly 1 answer"),
])
def test_bad_training_answers_name_the_question(tmp_path, mutate, message):
    question = qa("q1", "who?", "milk", STORE)
    mutate(question)
    path = squad_file(tmp_path / "train.json", [(STORE, [question])])
    with pytest.raises(ValueError, match=message):
        run_squad.read_squad_examples(path, is_training=True)


def test_malformed_files_name_the_file(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [', encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json is not valid SQuAD json"):
        run_squad.read_squad_examples(str(broken), False)
    nodata = tmp_path / "nodata.json"
    nodata.write_text('{"version": "1.1"}', encoding="utf-8")
    with pytest.raises(ValueError, match="nodata.json.*\"data\""):
        run_squad.read_squad_examples(str(nodata), False)
    nocontext = tmp_path / "nocontext.json"
    nocontext.write_text('{"data": [{"paragraphs": [{"qas": []}]}]}', encoding="utf-8")
    with pytest.raises(ValueError, match="nocontext.json.*'context'"):
        run_squad.read_squad_examples(str(nocontext), False)
    with pytest.raises(ValueError, match="not found.*missing.json"):
        run_squad.read_squad_examples(str(tmp_path / "missing.json"), False)


# ---------------------------------------------------------------------------
# Windows and answer spans
# ---------------------------------------------------------------------------

def test_max_context_prefers_the_window_where_a_token_is_central():
    # 12 tokens in windows of 5, stride 3: starts 0, 3, 6, 9 (the last one of 3 tokens).
    spans = input_pipeline.doc_spans(12, 5, 3)
    assert spans == [(0, 5), (3, 5), (6, 5), (9, 3)]
    best = [[i for i in range(len(spans)) if input_pipeline.check_is_max_context(spans, i, p)]
            for p in range(12)]
    assert best == [[0], [0], [0], [0], [1], [1], [1], [2], [2], [2], [3], [3]]
    # The same smaller side (1 token) in both: the longer window wins by its 1% bonus.
    spans = [run_squad.DocSpan(0, 3), run_squad.DocSpan(0, 5)]
    assert [input_pipeline.check_is_max_context(spans, i, 1) for i in (0, 1)] == [False, True]


def test_windows_of_a_long_document(tokenizer):
    example = run_squad.SquadExample("q1", "who bought milk", STORE.split(),
                                     orig_answer_text="bought a gallon",
                                     start_position=7, end_position=9)
    # max_seq_length 11 = [CLS] + 3 question tokens + [SEP] + 5 document tokens + [SEP].
    features = convert([example, example], tokenizer, 11, 3, is_training=True)
    assert [f.unique_id for f in features] == [1000000000 + i for i in range(8)]
    assert [(f.example_index, f.doc_span_index) for f in features[:5]] == [
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]

    f1 = features[1]
    assert f1.tokens == ["[CLS]", "who", "bought", "milk", "[SEP]",
                         "to", "the", "store", "and", "bought", "[SEP]"]
    assert f1.token_to_orig_map == {5: 3, 6: 4, 7: 5, 8: 6, 9: 7}
    assert f1.token_is_max_context == {5: False, 6: True, 7: True, 8: True, 9: False}
    assert f1.segment_ids == [0] * 5 + [1] * 6
    assert f1.input_ids == [WORDS.index(t) for t in f1.tokens]
    assert f1.input_mask == [1] * 11

    f3 = features[3]  # the last window is short: padded
    assert f3.tokens[5:] == ["gallon", "of", "milk", "[SEP]"]
    assert f3.input_ids[-2:] == [0, 0] and f3.input_mask[-3:] == [1, 0, 0]
    assert f3.segment_ids[-3:] == [1, 0, 0]
    # The answer (tokens 7..9) fits only in the third window.
    assert [(f.start_position, f.end_position) for f in features[:4]] == [
        (0, 0), (0, 0), (6, 8), (0, 0)]
    assert features[2].tokens[6:9] == ["bought", "a", "gallon"]


def test_wordpieces_map_back_to_words_and_answer_span_is_improved(tokenizer):
    context = "The leader was John Smith (1895-1943)."
    example = run_squad.SquadExample("q", "what year", context.split(), "1895", 5, 5)
    (feature,) = convert([example], tokenizer, 32, 8, is_training=True)
    assert feature.tokens[4:] == ["the", "leader", "was", "john", "smith", "(", "1895", "-",
                                  "1943", ")", ".", "[SEP]"]
    assert [feature.token_to_orig_map[i] for i in range(4, 15)] == [0, 1, 2, 3, 4] + [5] * 6
    # The whole word "(1895-1943)." is narrowed to its WordPiece "1895".
    assert (feature.start_position, feature.end_position) == (10, 10)

    # A sub-word answer keeps its whole word.
    pieces = ["the", "japanese", "electronics", "industry"]
    assert squad_data.improve_answer_span(pieces, 1, 1, tokenizer, "Japan") == (1, 1)
    pieces = ["(", "1895", "-", "1943", ")", "."]
    assert squad_data.improve_answer_span(pieces, 0, 5, tokenizer, "1895-1943") == (1, 3)


def test_question_truncation_and_impossible_examples(tokenizer):
    long_question = " ".join(["who"] * 10)
    impossible = run_squad.SquadExample("n", long_question, ["milk"], "", -1, -1, True)
    (feature,) = convert([impossible], tokenizer, 12, 4, max_query_length=4,
                         is_training=True)
    assert feature.tokens == ["[CLS]"] + ["who"] * 4 + ["[SEP]", "milk", "[SEP]"]
    assert (feature.start_position, feature.end_position, feature.is_impossible) == (
        0, 0, True)
    (feature,) = convert([impossible], tokenizer, 12, 4, max_query_length=4)
    assert (feature.start_position, feature.end_position) == (None, None)


def test_question_that_leaves_no_room_names_the_example(tokenizer):
    example = run_squad.SquadExample("q-long", "who who who who", ["milk"])
    with pytest.raises(ValueError, match="q-long leaves no room"):
        convert([example], tokenizer, 7, 2, max_query_length=10)


def test_feature_writer_records(tokenizer, tmp_path):
    import tensorflow as tf
    from bert_tf2 import input_pipeline
    example = run_squad.SquadExample("q1", "who", STORE.split(), "milk", 11, 11)
    path = str(tmp_path / "train.tf_record")
    with run_squad.FeatureWriter(path, is_training=True) as writer:
        for f in convert([example], tokenizer, 12, 4, is_training=True):
            writer.process_feature(f)
    assert writer.num_features == 2
    records = list(input_pipeline.make_dataset(
        path, input_pipeline.squad_features(12, True), 2, is_training=False))
    batch = {k: v.numpy() for k, v in records[0].items()}
    assert batch["unique_ids"].tolist() == [1000000000, 1000000001]
    assert batch["start_positions"].tolist() == [0, 10]
    raw = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(path))).numpy())
    assert raw.features.feature["is_impossible"].int64_list.value == [0]
    # An error inside the block leaves no file behind.
    with pytest.raises(RuntimeError):
        with run_squad.FeatureWriter(str(tmp_path / "x.tf_record"), False):
            raise RuntimeError("boom")
    assert sorted(os.listdir(tmp_path)) == ["train.tf_record"]


# ---------------------------------------------------------------------------
# Post-processing
# ---------------------------------------------------------------------------

def softmax(scores):
    exps = [math.exp(s - max(scores)) for s in scores]
    return [e / sum(exps) for e in exps]


def store_case(tokenizer):
    """The 4-window example above with hand-made logits (see the comments)."""
    example = run_squad.SquadExample("q1", "who bought milk", STORE.split())
    features = convert([example], tokenizer, 11, 3)
    logits = {}

    def put(span, start=None, end=None, null=None):
        s = np.full(11, -10.0, np.float32)
        e = np.full(11, -10.0, np.float32)
        for i, v in (start or {}).items():
            s[i] = v
        for i, v in (end or {}).items():
            e[i] = v
        if null is not None:
            s[0], e[0] = null
        logits[span] = (s, e)

    # Window 0 (words 0-4): "went" 3.0, "the man went" 1.5, "the" 1.0; position 2 is
    # in the question and never an answer.
    put(0, {2: 20, 7: 2, 5: 0.5}, {2: 20, 7: 1, 5: 0.5}, null=(1.0, 1.0))
    # Window 1 (words 3-7): position 9 ("bought") has more context in window 2, so its
    # start of 10 is ignored; "Store" 2.5, "the Store" 1.9, "the" 0.8.
    put(1, {9: 10, 7: 1, 6: 0.4}, {7: 1.5, 6: 0.4}, null=(0.5, 0.5))
    # Window 2 (words 6-10): "bought a gallon" 9; "bought a gallon of" is 4 tokens,
    # over max_answer_length=3; "bought" 5.
    put(2, {6: 5}, {8: 4, 9: 3.5, 6: 0}, null=(3.0, 3.0))
    # Window 3 (words 9-11): "of milk" 4; position 8 is [SEP], 9 is padding.
    put(3, {5: 3, 6: 2}, {9: 50, 8: 40, 7: 2}, null=(2.0, 2.0))
    results = [run_squad.RawResult(f.unique_id, [float(x) for x in logits[i][0]],
                                   [float(x) for x in logits[i][1]])
               for i, f in enumerate(features)]
    return example, features, results


def test_nbest_order_and_probabilities(tokenizer, tmp_path):
    example, features, results = store_case(tokenizer)
    for r in results:  # no null logits in SQuAD 1.1
        r.start_logits[0] = r.end_logits[0] = -10.0
    files = [str(tmp_path / n) for n in ("p.json", "n.json", "o.json")]
    out = run_squad.write_predictions([example], features, results, 4, 3, True, *files)
    nbest = out.nbest["q1"]
    assert [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest] == [
        ("bought a gallon", 5.0, 4.0), ("bought", 5.0, 0.0), ("of milk", 2.0, 2.0),
        ("went", 2.0, 1.0)]
    assert [e["probability"] for e in nbest] == pytest.approx(softmax([9, 5, 4, 3]))
    assert list(nbest[0]) == ["text", "probability", "start_logit", "end_logit"]
    assert out.predictions == {"q1": "bought a gallon"}
    with open(files[0]) as f:
        assert f.read() == '{\n    "q1": "bought a gallon"\n}\n'
    with open(files[1]) as f:
        assert json.load(f) == {"q1": nbest}
    assert not os.path.exists(files[2])
    assert sorted(os.listdir(tmp_path)) == ["n.json", "p.json"]  # no temp files left

    # With a larger n-best, the rest follow by score; duplicates of a text are dropped
    # ("the" from window 1 after "the" from window 0); "Store" keeps its case.
    out = run_squad.compute_predictions([example], features, results, 10, 3, True)
    assert [e["text"] for e in out.nbest["q1"]][:8] == [
        "bought a gallon", "bought", "of milk", "went", "Store", "the Store",
        "the man went", "the"]
    assert [e["text"] for e in out.nbest["q1"]].count("the") == 1


def test_streaming_results_match_full_logits(tokenizer):
    example, features, results = store_case(tokenizer)
    full = run_squad.compute_predictions([example], features, results, 4, 3, True, True)
    compact = run_squad.compact_batch(
        [r.unique_id for r in results], np.array([r.start_logits for r in results], np.float32),
        np.array([r.end_logits for r in results], np.float32), 4)
    slim = [run_squad.summarize_feature(f) for f in features]
    assert run_squad.compute_predictions([example], slim, compact, 4, 3, True, True) == full
    # Ties are ranked by position, as a stable descending sort does.
    assert squad_results.get_best_indexes([1.0, 3.0, 1.0, 3.0, 2.0], 4) == [1, 3, 4, 0]
    top = run_squad.compact_result(7, [1.0, 3.0, 1.0, 3.0, 2.0], [0.0] * 5, 4)
    assert [i for i, _ in top.start_candidates] == [1, 3, 4, 0]


def test_version_2_null_answer(tokenizer, tmp_path):
    example, features, results = store_case(tokenizer)
    files = [str(tmp_path / n) for n in ("p.json", "n.json", "o.json")]
    out = run_squad.write_predictions([example], features, results, 4, 3, True, *files,
                                      version_2_with_negative=True)
    nbest = out.nbest["q1"]
    # The null answer is scored where it is lowest (window 1: 0.5 + 0.5) and appended
    # after the n-best when it is not among them.
    assert [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest] == [
        ("bought a gallon", 5.0, 4.0), ("bought", 5.0, 0.0), ("of milk", 2.0, 2.0),
        ("went", 2.0, 1.0), ("", 0.5, 0.5)]
    assert [e["probability"] for e in nbest] == pytest.approx(softmax([9, 5, 4, 3, 1]))
    assert out.null_odds == {"q1": 1.0 - 9.0}
    assert out.predictions == {"q1": "bought a gallon"}
    with open(files[2]) as f:
        assert f.read() == '{\n    "q1": -8.0\n}\n'

    # The threshold rule: no answer when null odds > threshold.
    for threshold, expected in ((-8.0, "bought a gallon"), (-8.5, "")):
        out = run_squad.compute_predictions([example], features, results, 4, 3, True, True,
                                            null_score_diff_threshold=threshold)
        assert out.predictions == {"q1": expected}

    # A null answer inside the n-best takes its place in the order.
    results[1].start_logits[0] = results[1].end_logits[0] = 3.0
    for r in results:
        r.start_logits[0] = max(r.start_logits[0], 3.0)
        r.end_logits[0] = max(r.end_logits[0], 3.0)
    out = run_squad.compute_predictions([example], features, results, 3, 3, True, True)
    # (Null logits of 3 now push "bought" and "of milk" out of their windows' top 3.)
    assert [e["text"] for e in out.nbest["q1"]] == ["bought a gallon", "", "went"]
    assert out.null_odds == {"q1": 6.0 - 9.0}


def test_only_null_and_no_valid_span(tokenizer):
    example, features, results = store_case(tokenizer)
    # Every top logit on question tokens: no valid span at all.
    bad = [run_squad.RawResult(r.unique_id, [0.0, 9.0, 9.0, 9.0] + [-9.0] * 7,
                               [0.0, 9.0, 9.0, 9.0] + [-9.0] * 7) for r in results]
    out = run_squad.compute_predictions([example], features, bad, 3, 3, True)
    assert out.nbest["q1"] == [{"text": "empty", "probability": 1.0, "start_logit": 0.0,
                                "end_logit": 0.0}]
    assert out.predictions == {"q1": "empty"}
    # SQuAD 2.0: only the null answer survives (the original code fails here).
    out = run_squad.compute_predictions([example], features, bad, 3, 3, True, True)
    assert [e["text"] for e in out.nbest["q1"]] == [""]
    assert out.predictions == {"q1": ""} and out.null_odds == {"q1": 0.0}


def test_get_final_text():
    final = run_squad.get_final_text
    assert final("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert final("1895", "(1895-1943).", True) == "1895"
    assert final("cafe", "Caf\u00e9!", True) == "Caf\u00e9"
    # Accent stripping changes the length: the alignment gives up.
    assert final("cafe", "Cafe\u0301!", True) == "Cafe\u0301!"
    assert final("xyz", "abc", True) == "abc"
    assert final("Steve", "steve's", False) == "steve's"
    assert final("Steve", "Steve's", False) == "Steve"


def test_softmax_matches_the_definition():
    assert squad_results.compute_softmax([]) == []
    assert squad_results.compute_softmax([1.0, 2.0, 3.0]) == pytest.approx(softmax([1, 2, 3]))


# ---------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------

def test_squad_v1_metrics():
    articles = [{"paragraphs": [{"context": "c", "qas": [
        {"id": "a", "answers": [{"text": "Denver Broncos"}, {"text": "Broncos"}]},
        {"id": "b", "answers": [{"text": "the blue house"}]},
    ]}]}]
    preds = run_squad.SquadPredictions({"a": "the Broncos", "b": "blue car"}, {}, {}, {})
    results = run_squad.evaluate_predictions(articles, preds, False)
    # a: exact after normalization; b: F1 of {blue, car} vs {blue, house} = 0.5.
    assert results == {"exact_match": 50.0, "f1": 75.0, "total": 2}
    assert run_squad.has_gold_answers(articles, False)
    articles[0]["paragraphs"][0]["qas"][1]["answers"] = []
    assert not run_squad.has_gold_answers(articles, False)
    assert run_squad.has_gold_answers(articles, True)


def test_squad_v2_metrics_and_best_threshold():
    articles = [{"paragraphs": [{"context": "c", "qas": [
        {"id": "q1", "answers": [{"text": "Denver Broncos"}]},
        {"id": "q2", "answers": []},
        {"id": "q3", "answers": [{"text": "blue"}]},
        {"id": "q4", "answers": []},
    ]}]}]
    best_non_null = {"q1": "Denver Broncos", "q2": "foo", "q3": "blue", "q4": "bar"}
    null_odds = {"q1": -3.0, "q2": 2.0, "q3": 1.0, "q4": -1.0}
    predictions = squad_results.apply_null_threshold(best_non_null, null_odds, 0.0)
    assert predictions == {"q1": "Denver Broncos", "q2": "", "q3": "", "q4": "bar"}
    preds = run_squad.SquadPredictions(predictions, {}, null_odds, best_non_null)
    results = run_squad.evaluate_predictions(articles, preds, True)
    assert results["exact"] == 50.0 and results["f1"] == 50.0 and results["total"] == 4
    assert results["HasAns_exact"] == 50.0 and results["NoAns_exact"] == 50.0
    # Thresholds -3 (q1 answered, the rest null) gives 3 of 4.
    assert (results["best_exact"], results["best_exact_thresh"]) == (75.0, -3.0)
    assert (results["best_f1"], results["best_f1_thresh"]) == (75.0, -3.0)
    rethresholded = squad_results.apply_null_threshold(best_non_null, null_odds, -3.0)
    again = run_squad.evaluate_predictions(
        articles, preds._replace(predictions=rethresholded), True)
    assert again["exact"] == 75.0
    assert squad_results.effective_best_threshold(results) == -3.0

    # When answering nothing is best, the official search reports threshold 0.0;
    # re-thresholding uses one below every null odds instead.
    best_non_null = {"q1": "wrong", "q2": "foo", "q3": "wrong", "q4": "bar"}
    preds = run_squad.SquadPredictions(predictions, {}, null_odds, best_non_null)
    results = run_squad.evaluate_predictions(articles, preds, True)
    assert (results["best_f1"], results["best_f1_thresh"]) == (50.0, 0.0)
    threshold = squad_results.effective_best_threshold(results)
    assert set(squad_results.apply_null_threshold(best_non_null, null_odds,
                                               threshold).values()) == {""}


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def tiny_config_file(tmp_path, max_position_embeddings=128):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({
        "vocab_size": len(WORDS), "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 32,
        "max_position_embeddings": max_position_embeddings, "type_vocab_size": 2}))
    return str(path)


def test_flag_defaults():
    fv = flags_common.parse_flags(run_squad.define_flags, [])
    assert (fv.do_lower_case, fv.max_seq_length, fv.doc_stride, fv.max_query_length) == (
        True, 384, 128, 64)
    assert (fv.train_batch_size, fv.predict_batch_size, fv.learning_rate) == (32, 8, 5e-5)
    assert (fv.num_train_epochs, fv.warmup_proportion, fv.n_best_size) == (3.0, 0.1, 20)
    assert (fv.max_answer_length, fv.verbose_logging, fv.version_2_with_negative) == (
        30, False, False)
    assert (fv.null_score_diff_threshold, fv.rethreshold_predictions) == (0.0, False)
    assert (fv.save_checkpoints_steps, fv.iterations_per_loop, fv.use_tpu) == (1000, 1000, False)
    # Off for run_squad (on for the other runners): the reference's files by default.
    assert fv.trim_padding is False


def test_top_real_positions_follow_the_stable_sort():
    rng = np.random.RandomState(3)
    logits = np.round(rng.randn(4, 12), 1).astype(np.float32)  # ties on purpose
    mask = (np.arange(12)[None, :] < np.array([[12], [7], [3], [0]])).astype(np.int32)
    index, values = squad_results.top_real_positions(logits, mask, 5)
    got = squad_results.compact_top([10, 11, 12, 13], index, values, index, values,
                                    logits[:, 0], logits[:, 0])
    for row, result in enumerate(got):
        real = int(mask[row].sum())
        order = sorted(range(real), key=lambda i: -logits[row, i])[:5]  # stable: ties by position
        assert result.start_candidates == [(i, float(logits[row, i])) for i in order]
        assert result.unique_id == 10 + row and result.null_start_logit == float(logits[row, 0])


@pytest.mark.parametrize("args, message", [
    ([], "--vocab_file is required"),
    (["--vocab_file=v"], "--bert_config_file is required"),
    (["--vocab_file=v", "--bert_config_file=CONFIG"], "--output_dir is required"),
    (["--vocab_file=v", "--bert_config_file=CONFIG", "--output_dir=o"],
     "do_train or --do_predict"),
    (["--vocab_file=v", "--bert_config_file=CONFIG", "--output_dir=o", "--do_train"],
     "needs --train_file"),
    (["--vocab_file=v", "--bert_config_file=CONFIG", "--output_dir=o", "--do_predict"],
     "needs --predict_file"),
    (["--vocab_file=v", "--bert_config_file=CONFIG", "--output_dir=o", "--do_predict",
      "--predict_file=p", "--max_seq_length=256"], "max_position_embeddings=128"),
    (["--vocab_file=v", "--bert_config_file=CONFIG", "--output_dir=o", "--do_predict",
      "--predict_file=p", "--max_seq_length=67"], r"greater than --max_query_length \(64\) \+ 3"),
    (["--vocab_file=v", "--bert_config_file=CONFIG", "--output_dir=o", "--do_predict",
      "--predict_file=p", "--max_seq_length=128", "--doc_stride=0"],
     "doc_stride must be at least 1"),
    (["--vocab_file=v", "--bert_config_file=CONFIG", "--output_dir=o", "--do_predict",
      "--predict_file=p", "--init_checkpoint=x/cased_L-12_H-768_A-12/bert_model.ckpt"],
     "do_lower_case"),
])
def test_flag_validation(tmp_path, args, message):
    config = tiny_config_file(tmp_path)
    args = [a.replace("CONFIG", config).replace("=o", "=" + str(tmp_path / "o"))
            for a in args]
    fv = flags_common.parse_flags(run_squad.define_flags, args)
    with pytest.raises(ValueError, match=message):
        run_squad.run(fv)
    assert not (tmp_path / "o").exists()


def test_bad_predict_file_fails_before_anything_is_written(tmp_path, tokenizer):
    broken = tmp_path / "dev.json"
    broken.write_text("not json", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    fv = flags_common.parse_flags(run_squad.define_flags, [
        "--vocab_file=%s" % vocab, "--bert_config_file=%s" % tiny_config_file(tmp_path),
        "--output_dir=%s" % (tmp_path / "out"), "--do_predict",
        "--predict_file=%s" % broken, "--max_seq_length=32", "--max_query_length=8"])
    with pytest.raises(ValueError, match="dev.json is not valid SQuAD json"):
        run_squad.run(fv)
    assert not (tmp_path / "out" / "predictions.json").exists()


# ---------------------------------------------------------------------------
# Real data (../shared)
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dev_articles(shared_dir):
    with open(shared_dir / "data" / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
        return json.load(f)["data"][:2]


@pytest.fixture(scope="module")
def uncased(shared_dir):
    return tokenization.FullTokenizer(str(shared_dir / "data" / "vocab" / "uncased_vocab.txt"))


def first_answers(articles):
    out = json.loads(json.dumps(articles))
    for article in out:
        for paragraph in article["paragraphs"]:
            for q in paragraph["qas"]:
                q["answers"] = q["answers"][:1]
    return out


def test_dev_windows_of_the_first_question(dev_articles, uncased):
    examples = run_squad.examples_from_articles(first_answers(dev_articles), True)
    first = examples[0]
    assert first.question_text == "Which NFL team represented the AFC at Super Bowl 50?"
    assert (first.start_position, first.end_position) == (28, 29)  # "Denver Broncos"
    features = convert([first], uncased, 64, 32, 16, is_training=True)
    # 11 question tokens leave 50 document tokens per window; 157 tokens in all.
    assert [len(f.tokens) for f in features] == [64, 64, 64, 64, 43]
    assert [min(f.token_to_orig_map) for f in features] == [13] * 5
    assert [f.tokens[13] for f in features] == ["super", "champion", ",", '"', "which"]
    # Window 0 holds document tokens 0-49, window 1 tokens 32-81: token 33, "denver",
    # is in both and has more context in window 0, up to token 40.
    assert [(f.start_position, f.end_position) for f in features] == [
        (46, 47), (14, 15), (0, 0), (0, 0), (0, 0)]
    assert features[0].tokens[46:48] == features[1].tokens[14:16] == ["denver", "broncos"]
    assert features[0].token_to_orig_map[46] == 28 and features[0].token_to_orig_map[47] == 29
    max_context = [[p for p, m in f.token_is_max_context.items() if m] for f in features]
    assert max_context[0] == list(range(13, 54))        # tokens 0-40
    assert max_context[1][0] == 22                       # token 41
    assert max_context[4][-1] == 41                      # the last token


def test_dev_features_are_consistent(dev_articles, uncased):
    articles = first_answers(dev_articles)
    examples = run_squad.examples_from_articles(articles, True)
    features = convert(examples, uncased, 96, 32, 24, is_training=True)
    by_example = {}
    for f in features:
        by_example.setdefault(f.example_index, []).append(f)
    answered = improved = 0
    for index, example in enumerate(examples):
        windows = by_example[index]
        # Every WordPiece of the document is the max-context token of exactly one window.
        num_pieces = sum(len(uncased.tokenize(w)) for w in example.doc_tokens)
        assert sum(sum(f.token_is_max_context.values()) for f in windows) == num_pieces
        wanted = " ".join(uncased.tokenize(example.orig_answer_text))
        for f in windows:
            if not f.start_position:
                continue
            answered += 1
            span = " ".join(f.tokens[f.start_position:f.end_position + 1])
            words = example.doc_tokens[f.token_to_orig_map[f.start_position]:
                                       f.token_to_orig_map[f.end_position] + 1]
            # The span is the answer's own WordPieces, or else those of its whole words.
            assert span == wanted or span == " ".join(uncased.tokenize(" ".join(words)))
            improved += span == wanted
    assert answered >= len(examples)
    assert improved >= 0.95 * answered


def test_golden_squad_head_loads_into_bert_squad(shared_dir):
    import tensorflow as tf
    from bert_tf2.trainer import checkpoints
    from bert_tf2 import heads
    import modeling
    golden = shared_dir / "golden" / "tf1_tiny"
    config = modeling.BertConfig.from_json_file(str(golden / "bert_config.json"))
    model = heads.BertSquad(config)
    expected = np.load(golden / "expected_outputs.npz")
    features = {k: expected[k] for k in ("input_ids", "input_mask", "segment_ids")}
    model(features)
    checkpoints.load_checkpoint(model, str(golden / "bert_model.ckpt"))
    reader = tf.train.load_checkpoint(str(golden / "bert_model.ckpt"))
    weights = reader.get_tensor("cls/squad/output_weights")
    bias = reader.get_tensor("cls/squad/output_bias")
    assert weights.shape == (2, 16)
    names = {k: v.numpy() for k, v in checkpoints.tf1_variable_map(model).items()}
    np.testing.assert_array_equal(names["cls/squad/output_weights"], weights)
    np.testing.assert_array_equal(names["cls/squad/output_bias"], bias)
    out = model(features)
    logits = expected["sequence_output"] @ weights.T + bias
    np.testing.assert_allclose(out["start_logits"].numpy(), logits[..., 0], atol=1e-4)
    np.testing.assert_allclose(out["end_logits"].numpy(), logits[..., 1], atol=1e-4)


# ---------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------

def run_flags(shared_dir, out, *extra):
    golden = shared_dir / "golden" / "tf1_tiny"
    return flags_common.parse_flags(run_squad.define_flags, [
        "--vocab_file=%s" % (golden / "vocab.txt"),
        "--bert_config_file=%s" % (golden / "bert_config.json"),
        "--init_checkpoint=%s" % (golden / "bert_model.ckpt"),
        "--output_dir=%s" % out, "--max_seq_length=64", "--doc_stride=32",
        "--max_query_length=16", "--train_batch_size=8", "--predict_batch_size=16",
        "--num_train_epochs=1", "--learning_rate=1e-3", "--seed=1"] + list(extra))


def read_results(path):
    with open(path) as f:
        return dict(line.strip().split(" = ") for line in f)


def one_paragraph_each(dev_articles, tmp_path):
    """The first two paragraphs of the dev set's first article; train.json holds the first
    (its first answers), dev.json the second. Returns (paragraphs, train, dev)."""
    paragraphs = dev_articles[0]["paragraphs"][:2]
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"data": first_answers([{"paragraphs": paragraphs[:1]}])}))
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps({"data": [{"paragraphs": paragraphs[1:2]}]}))
    return paragraphs, train, dev


@pytest.fixture(scope="module")
def flags_run(shared_dir, dev_articles, tmp_path_factory):
    """one_paragraph_each's files trained and predicted in one run of parsed flags:
    (paragraphs, train, dev, output folder, Result)."""
    tmp_path = tmp_path_factory.mktemp("squad_flags_run")
    paragraphs, train, dev = one_paragraph_each(dev_articles, tmp_path)
    out = tmp_path / "out"
    result = run_squad.run(run_flags(shared_dir, out, "--do_train", "--do_predict",
                                     "--train_file=%s" % train, "--predict_file=%s" % dev))
    return paragraphs, train, dev, out, result


@pytest.mark.slow
def test_train_then_predict_squad_v1(flags_run):
    paragraphs, _, _, out, result = flags_run
    metrics = result.metrics
    names = set(os.listdir(out))
    assert {"train.tf_record", "eval.tf_record", "predictions.json", "nbest_predictions.json",
            "eval_results.txt", "checkpoint"} <= names
    assert "null_odds.json" not in names and not any(".tmp-" in n for n in names)
    with open(out / "predictions.json") as f:
        predictions = json.load(f)
    qids = [q["id"] for q in paragraphs[1]["qas"]]
    assert list(predictions) == qids
    with open(out / "nbest_predictions.json") as f:
        nbest = json.load(f)
    assert all(predictions[q] == nbest[q][0]["text"] for q in qids)
    assert all(1 <= len(nbest[q]) <= 20 for q in qids)
    results = read_results(out / "eval_results.txt")
    assert set(results) == {"exact_match", "f1", "total"}
    assert float(results["f1"]) == pytest.approx(metrics["f1"])
    assert 0.0 <= float(results["exact_match"]) <= float(results["f1"]) <= 100.0
    assert results["total"] == str(len(qids))


def run_settings(shared_dir, out, **extra):
    """The Settings of run_flags's command line, made in Python (no flag parsing)."""
    golden = shared_dir / "golden" / "tf1_tiny"
    values = dict(
        vocab_file=str(golden / "vocab.txt"), bert_config_file=str(golden / "bert_config.json"),
        init_checkpoint=str(golden / "bert_model.ckpt"), output_dir=str(out),
        max_seq_length=64, doc_stride=32, max_query_length=16, train_batch_size=8,
        predict_batch_size=16, num_train_epochs=1.0, learning_rate=1e-3, seed=1)
    values.update(extra)
    return run_squad.Settings(**values)


@pytest.mark.slow
def test_run_with_settings_returns_what_it_wrote(shared_dir, dev_articles, tmp_path,
                                                 flags_run):
    """run(Settings(...)) twice in one process, training then predicting from that folder:
    each Result names the files it wrote and holds their numbers, as the command line's
    (flags_run: the same training and prediction from parsed flags, in one run)."""
    _, train, dev = one_paragraph_each(dev_articles, tmp_path)
    out = tmp_path / "settings"
    trained = run_squad.run(run_settings(shared_dir, out, do_train=True, train_file=str(train)))
    assert trained.output_dir == str(out) and trained.metrics == {}
    assert trained.outputs == {"train_records": str(out / "train.tf_record")}
    assert trained.global_step > 0 and trained.best_checkpoint is None
    # Predicting names the trained folder: golden's tiny checkpoint holds every head, so as
    # --init_checkpoint of a run that does not train it would be the model used.
    predicted = run_squad.run(run_settings(shared_dir, out, do_predict=True,
                                           predict_file=str(dev), init_checkpoint=str(out)))
    assert predicted.global_step == trained.global_step  # the trained checkpoint restored
    assert predicted.outputs == {
        "eval_records": str(out / "eval.tf_record"), "predictions": str(out / "predictions.json"),
        "nbest_predictions": str(out / "nbest_predictions.json"),
        "eval_results": str(out / "eval_results.txt")}
    assert all(os.path.isfile(path) for path in predicted.outputs.values())
    assert read_results(predicted.outputs["eval_results"]) == {
        key: str(value) for key, value in predicted.metrics.items()}
    assert set(predicted.metrics) == {"exact_match", "f1", "total"}

    # The same training and prediction from parsed flags: the same steps, numbers and
    # answers (the files of the prediction under the same names).
    cli, from_flags = flags_run[3], flags_run[4]
    assert from_flags.global_step == predicted.global_step
    assert from_flags.metrics == predicted.metrics
    assert from_flags.outputs == dict(
        {name: path.replace(str(out), str(cli)) for name, path in predicted.outputs.items()},
        train_records=str(cli / "train.tf_record"))
    for name in ("predictions", "nbest_predictions"):
        with open(predicted.outputs[name]) as f, open(from_flags.outputs[name]) as g:
            assert json.load(f) == json.load(g)


@pytest.mark.slow
def test_predict_squad_v2_with_threshold(shared_dir, dev_articles, tmp_path):
    paragraphs = json.loads(json.dumps(dev_articles[1]["paragraphs"][:2]))
    for i, q in enumerate(q for p in paragraphs for q in p["qas"]):
        q["is_impossible"] = i % 3 == 0
        if q["is_impossible"]:
            q["answers"] = []
    dev = tmp_path / "dev-v2.json"
    dev.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": paragraphs}]}))
    out = tmp_path / "out"
    result = run_squad.run(run_flags(shared_dir, out, "--do_predict", "--predict_file=%s" % dev,
                                     "--version_2_with_negative",
                                     "--null_score_diff_threshold=0.5",
                                     "--rethreshold_predictions"))
    assert result.outputs == {name: str(out / path) for name, path in (
        ("eval_records", "eval.tf_record"), ("predictions", "predictions.json"),
        ("nbest_predictions", "nbest_predictions.json"), ("null_odds", "null_odds.json"),
        ("eval_results", "eval_results.txt"),
        ("predictions_best_thresh", "predictions_best_thresh.json"))}
    loaded = {}
    for name in ("predictions", "nbest_predictions", "null_odds", "predictions_best_thresh"):
        with open(out / (name + ".json")) as f:
            loaded[name] = json.load(f)
    qids = [q["id"] for p in paragraphs for q in p["qas"]]
    assert list(loaded["null_odds"]) == qids
    results = read_results(out / "eval_results.txt")
    assert results == {key: str(value) for key, value in result.metrics.items()}
    assert {"exact", "f1", "HasAns_exact", "NoAns_exact", "best_f1", "best_f1_thresh",
            "best_exact", "best_exact_thresh"} <= set(results)
    for qid in qids:
        entries = loaded["nbest_predictions"][qid]
        assert "" in [e["text"] for e in entries]
        best_non_null = next((e["text"] for e in entries if e["text"]), "")
        odds = loaded["null_odds"][qid]
        assert loaded["predictions"][qid] == ("" if odds > 0.5 else best_non_null)
    # The re-thresholded predictions reach the best F1 of the search.
    from official.nlp.tools import squad_evaluate_v2_0
    rescored = squad_evaluate_v2_0.evaluate(
        [{"paragraphs": paragraphs}], loaded["predictions_best_thresh"])
    assert rescored["f1"] == pytest.approx(float(results["best_f1"]))
    assert rescored["f1"] >= float(results["f1"])


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--enable_xla"]], ids=["skip_padding", "xla"])
def test_trimmed_prediction_ranks_the_real_positions_of_full_logits(shared_dir, dev_articles,
                                                                     tmp_path, extra,
                                                                     monkeypatch):
    # Without XLA the encoder also skips the padding; under XLA it is left off (static shapes).
    widths = []
    dataset_fn_for = input_pipeline.dataset_fn_for

    def recording(*args, **kwargs):
        widths.append(kwargs.get("bucket_width"))
        return dataset_fn_for(*args, **kwargs)
    monkeypatch.setattr(input_pipeline, "dataset_fn_for", recording)
    # The run's own runner and trimmed n-best, as its do_predict made them.
    made = []
    predict = squad_task.predict

    def keeping(settings, runner, *args, **kwargs):
        made.append((runner, predict(settings, runner, *args, **kwargs)))
        return made[-1][1]
    monkeypatch.setattr(squad_task, "predict", keeping)
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps({"data": [{"paragraphs": dev_articles[1]["paragraphs"][:2]}]}))
    out = tmp_path / "out"
    fv = run_flags(shared_dir, out, "--do_predict", "--predict_file=%s" % dev,
                   "--max_seq_length=96", "--predict_batch_size=4", "--trim_padding", *extra)
    run_squad.run(fv)  # the whole run, trimmed
    (runner, (summaries, trimmed)), = made
    with open(out / "predictions.json") as f:
        predictions = json.load(f)
    assert list(predictions) == [q["id"] for p in dev_articles[1]["paragraphs"][:2]
                                 for q in p["qas"]]
    # Windows rounded up to multiples of 4; under XLA (a program per length) of 16.
    assert widths == [None if extra else input_pipeline.SQUAD_PREDICT_BUCKET_WIDTH]
    # Window by window: the n-best of the trimmed run are those of the full-length
    # logits (the run's runner, the padded records it wrote) with the padding positions
    # left out.
    dataset_fn = input_pipeline.dataset_fn_for(
        [str(out / "eval.tf_record")], input_pipeline.squad_features(96, False), 4,
        is_training=False)
    full = [b for b in runner.predict(dataset_fn, squad_task.predict_fn)]
    starts = np.concatenate([b["start_logits"] for b in full])[:len(summaries)]
    ends = np.concatenate([b["end_logits"] for b in full])[:len(summaries)]
    lengths = np.array([len(s.tokens) for s in summaries])
    assert lengths.min() < 80 and lengths.max() == 96  # some windows were cut
    padding = np.arange(96)[None, :] >= lengths[:, None]
    expected = squad_results.compact_batch(
        [s.unique_id for s in summaries], np.where(padding, -np.inf, starts),
        np.where(padding, -np.inf, ends), fv.n_best_size)
    assert len(trimmed) == len(expected)
    for got, want in zip(trimmed, expected):
        assert got.unique_id == want.unique_id
        for side in ("start_candidates", "end_candidates"):
            kept = [c for c in getattr(want, side) if c[1] > -np.inf]
            assert [i for i, _ in getattr(got, side)] == [i for i, _ in kept]
            np.testing.assert_allclose([v for _, v in getattr(got, side)],
                                       [v for _, v in kept], atol=1e-5)
        assert got.null_start_logit == pytest.approx(want.null_start_logit, abs=1e-5)


def test_loss_is_the_mean_of_start_and_end_cross_entropies():
    rng = np.random.RandomState(0)
    start, end = rng.randn(3, 7).astype(np.float32), rng.randn(3, 7).astype(np.float32)
    starts, ends = np.array([0, 3, 6]), np.array([2, 3, 0])

    def cross_entropy(logits, positions):
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -log_probs[np.arange(3), positions].mean()

    expected = (cross_entropy(start, starts) + cross_entropy(end, ends)) / 2
    loss = run_squad.squad_loss(start, end, starts, ends)
    assert float(loss) == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_eval_during_training_scores_the_predict_file(shared_dir, dev_articles, tmp_path):
    _, train, dev = one_paragraph_each(dev_articles, tmp_path)
    out = tmp_path / "out"
    result = run_squad.run(run_flags(shared_dir, out, "--do_train", "--do_predict",
                                     "--train_file=%s" % train, "--predict_file=%s" % dev,
                                     "--eval_every_n_steps=1", "--best_metric=f1"))
    metrics = result.metrics
    with open(out / "eval_history.jsonl") as f:
        history = [json.loads(line) for line in f]
    assert [r["global_step"] for r in history] == list(range(1, len(history) + 1))
    assert set(history[0]) == {"global_step", "exact_match", "f1", "total"}
    # predictions.json and eval_results.txt come from the last checkpoint, as before.
    assert history[-1] == dict(metrics, global_step=len(history))
    best = json.loads((out / "best" / "best.json").read_text())
    assert best["value"] == max(r["f1"] for r in history)
    assert result.best_checkpoint == str(out / "best" / ("model.ckpt-%d" % best["global_step"]))
    assert result.global_step == len(history)
    # best/ alone answers (config, vocab, lengths and stride from its model_settings.json)
    # as the best evaluation scored.
    alone = run_squad.run(flags_common.parse_flags(run_squad.define_flags, [
        "--init_checkpoint=%s" % (out / "best"), "--output_dir=%s" % (tmp_path / "alone"),
        "--do_predict", "--predict_file=%s" % dev, "--predict_batch_size=16"]))
    assert alone.metrics["f1"] == best["value"]
