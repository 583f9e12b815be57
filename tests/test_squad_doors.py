"""Every door of a SQuAD model answers as run_squad.py --do_predict's predictions.json.

The run's tiny SQuAD 2.0 model (tests/trained.py's trained_squad_v2: hidden 32, 2 layers,
max_seq_length 32, --doc_stride 12, --max_query_length 8; only read here), so the contexts
here take 1 to 6+ windows. Its answers to the same (question, context) pairs through
- run_squad.py --do_predict (predictions.json, nbest_predictions.json),
- the SavedModel's answer() (export_saved_model.py, tf.saved_model.load; exported here
  under SQuAD 1.1 rules and under the folder's 2.0 with a threshold amid its null odds),
- LiteRT fp32 (LiteRTPredictor.answers of the run's shared export, under each export's
  rules),
- run_squad.predict(folder, ...)
must be the same text, with scores within 1e-5, under SQuAD 1.1 rules and SQuAD 2.0's
null rule. A tiny trained model's answers are near-random but deterministic: parity is
what is checked. dev-v1.1.json's long paragraphs join in when ../shared is there.
"""
import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import export_saved_model as esm
import parity_helpers as ph
import run_squad
import tokenization
from bert_tf2 import flags_common
from bert_tf2.export import litert_predictor
from bert_tf2.export import serving_squad
from conftest import write_text

SEQ = ph.SQUAD_SEQ  # the trained folder's (tests/parity_helpers.py's Squad.settings)
STRIDE = 12
QUERY = 8
SCORE_TOL = 1e-5

_SENTENCES = [
    "The committee met on Tuesday in Geneva to discuss the shipping rules.",
    "Several delegations opposed the proposals because of their cost to smaller ports.",
    "Ann Lee wrote the report in 1990 and presented it to the council in Paris.",
    "Fishing fleets of the north asked for more time before the new rules applied.",
    "The river flows through the valley past three old mills and a stone bridge.",
    "In winter the lake freezes and children skate near the northern shore.",
]
_QUESTIONS = ["Who wrote the report?", "Where did the committee meet?",
              "What opposed the proposals?", "When does the lake freeze?",
              "What flows through the valley?", "Who asked for more time?"]


def _context(first, count):
    return " ".join(_SENTENCES[(first + i) % len(_SENTENCES)] for i in range(count))


# (question, context) pairs: short contexts, 2, 3 and more windows, odd characters, empty
# and whitespace-only texts, duplicates (asked twice in one batch).
CASES = [
    ("Who wrote it?", "Ann Lee wrote it in 1990."),
    ("Where?", "Geneva."),
    (_QUESTIONS[0], _context(2, 2) + " It rained."),  # 2 windows
    (_QUESTIONS[3], _context(2, 3)),                  # 3 windows
    (_QUESTIONS[2], _context(1, 5)),
    (_QUESTIONS[3], _context(3, 6)),
    (_QUESTIONS[4], _context(4, 4) + "\n\n" + _context(0, 2)),
    ("Who went to the café?", "Zoë went to the Café Noël in Zürich; naïve résumé. "
     "The decomposed cafe\u0301 and Ame\u0301lie stayed home."),
    ("What city is 東京?", "東京 is Tokyo, 中文字 means Chinese characters, 北京 is Beijing."),
    ("What made her smile?", "The emoji \U0001F600 made her smile and \U0001F680 flew."),
    ("What is hidden?", "zero\u200bwidth space and joiner\u200d marks hide in "
     "soft\u00adhyphen words."),
    ("Which spaces?", "narrow\u202fno-break\tspace and no\u00a0break and\r\nline ends."),
    ("", "Ann Lee wrote the report in 1990."),
    ("   ", _context(0, 2)),
    ("Who wrote it?", ""),
    ("Who wrote it?", " \t\n\u202f "),
    ("", ""),
    ("ΣΑΣ ΟΔΟΣ?", "Η ΟΔΟΣ ΣΑΣ is Greek, and ὈΔΥΣΣΕΎΣ too."),
    (_QUESTIONS[0], _context(2, 2) + " It rained."),  # the 2-window case again
]


def _dev_pairs(shared_dir):
    """(questions, contexts) of the cases, plus dev-v1.1.json's first questions when there."""
    pairs = list(CASES)
    if shared_dir is not None:
        with open(shared_dir / "data" / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
            paragraphs = json.load(f)["data"][0]["paragraphs"][:4]
        pairs += [(qa["question"], p["context"]) for p in paragraphs for qa in p["qas"][:2]]
    return [q for q, _ in pairs], [c for _, c in pairs]


def _shared_or_none():
    from conftest import SHARED_DIR  # pylint: disable=import-outside-toplevel
    if SHARED_DIR is None or not os.path.isfile(
            os.path.join(str(SHARED_DIR), "data", "squad", "dev-v1.1.json")):
        return None
    return SHARED_DIR


@pytest.fixture(scope="module")
def folder(tmp_path_factory, trained_squad_v2):
    """The run's trained run_squad --version_2_with_negative folder (shared: only read) and
    its export (SavedModel + LiteRT fp32, made once per run); the pairs to answer."""
    root = tmp_path_factory.mktemp("squad_doors")
    questions, contexts = _dev_pairs(_shared_or_none())
    trained_squad_v2.saved_model()
    with open(os.path.join(trained_squad_v2.folder, "model_settings.json"),
              encoding="utf-8") as f:
        settings = json.load(f)
    assert (settings["max_seq_length"], settings["doc_stride"],
            settings["max_query_length"]) == (SEQ, STRIDE, QUERY), settings
    return {"root": root, "out": pathlib.Path(trained_squad_v2.folder), "questions": questions,
            "contexts": contexts, "settings": settings,
            "shared_export": trained_squad_v2.export_dir}


def _threshold(null_odds):
    """A SQuAD 2.0 threshold amid the model's null odds (in their widest gap near the
    middle, far from every one), so that both kinds of answer occur."""
    odds = sorted(null_odds)
    middle = len(odds) // 2
    _, i = max((odds[i + 1] - odds[i], i) for i in range(middle - 3, middle + 3))
    return float((odds[i] + odds[i + 1]) / 2)


def _predictions_json(folder, version, threshold):
    """run_squad.py --do_predict's answers of the pairs: {qid: (text, score)}."""
    out = folder["root"] / ("predict_" + version)
    articles = [{"title": "dev", "paragraphs": [
        {"context": c, "qas": [{"id": str(i), "question": q}]}
        for i, (q, c) in enumerate(zip(folder["questions"], folder["contexts"]))]}]
    dev = write_text(folder["root"] / ("dev_%s.json" % version), json.dumps({"data": articles}))
    run_squad.run(flags_common.parse_flags(run_squad.define_flags, [
        "--init_checkpoint=%s" % folder["out"], "--output_dir=%s" % out, "--do_predict",
        "--predict_file=%s" % dev, "--predict_batch_size=5",
        "--version_2_with_negative=%s" % (version != "v1"),
        "--null_score_diff_threshold=%r" % threshold]))
    with open(out / "predictions.json", encoding="utf-8") as f:
        predictions = json.load(f)
    with open(out / "nbest_predictions.json", encoding="utf-8") as f:
        nbest = json.load(f)
    return {qid: (text, _score_of(nbest[qid], text)) for qid, text in predictions.items()}


def _score_of(nbest, text):
    """start + end logit of the first n-best entry of `text` (the answer's own score)."""
    entry = next(e for e in nbest if e["text"] == text)
    return entry["start_logit"] + entry["end_logit"]


def _door_answers(folder, version, threshold):
    """The answers of the SavedModel (exported now), run_squad.predict() and
    predictions.json."""
    export_dir = folder["root"] / ("export_" + version)
    argv = ["--init_checkpoint=%s" % folder["out"], "--export_dir=%s" % export_dir]
    if version == "v1":  # the folder's SQuAD 2.0, overridden
        argv.append("--noversion_2_with_negative")
    else:  # the folder's
        argv += ["--null_score_diff_threshold=%r" % threshold]
    esm.run(flags_common.parse_flags(esm.define_flags, argv))
    questions, contexts = folder["questions"], folder["contexts"]
    loaded = tf.saved_model.load(str(export_dir))  # held while its function runs
    saved = loaded.answer(tf.constant(questions), tf.constant(contexts))
    with open(export_dir / "assets.extra" / "export_info.json", encoding="utf-8") as f:
        info = json.load(f)
    python = run_squad.predict(str(folder["out"]), questions, contexts,
                               version_2_with_negative=version == "v2",
                               null_score_diff_threshold=threshold)
    return {"files": _predictions_json(folder, version, threshold), "threshold": threshold,
            "saved": {k: v.numpy() for k, v in saved.items()}, "python": python,
            "info": info, "export_dir": export_dir}


@pytest.fixture(scope="module")
def doors(folder):
    """{"v1", "v2": every door's answers under SQuAD 1.1 rules, and the folder's 2.0}.

    The 2.0 threshold comes from the 1.1 export's null odds (the same numbers). One LiteRT
    model (the run's shared export of the folder) serves both: its answers are
    LiteRTPredictor's decoding under the rules each export here recorded.
    """
    v1 = _door_answers(folder, "v1", 0.0)
    v2 = _door_answers(folder, "v2", _threshold(v1["saved"]["null_odds"]))
    litert = litert_predictor.LiteRTPredictor(folder["shared_export"], "fp32")
    questions, contexts = folder["questions"], folder["contexts"]
    litert.squad_rules = litert_predictor.squad_rules(v2["info"])
    v2["litert"] = litert.answers(questions, contexts)
    litert.squad_rules = litert_predictor.squad_rules(v1["info"])
    v1["litert"] = litert.answers(questions, contexts)
    return {"v1": v1, "v2": v2}


def _windows(folder):
    tokenizer = tokenization.FullTokenizer(str(folder["out"] / "vocab.txt"), True)
    counts = []
    for question, context in zip(folder["questions"], folder["contexts"]):
        query = min(len(tokenizer.tokenize(question)), QUERY)
        pieces = len(tokenizer.tokenize(context))
        room = SEQ - query - 3
        counts.append(0 if not pieces else 1 + max(0, -(-(pieces - room) // min(STRIDE, room))))
    return counts


def test_the_cases_cover_what_they_claim(folder):
    counts = _windows(folder)
    assert counts[:4] == [1, 1, 2, 3]
    assert max(counts) >= 6 and counts.count(0) == 3


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_export_records_the_folders_settings(folder, doors, version):
    doors = dict(doors[version], version=version, settings=folder["settings"])
    info = doors["info"]
    assert info["doc_stride"] == STRIDE and info["max_query_length"] == QUERY  # the folder's
    assert info["version_2_with_negative"] == (doors["version"] == "v2")
    assert info["null_score_diff_threshold"] == doors["threshold"]
    recorded = dict(doors["settings"])  # the folder's, run_squad's defaults where absent
    assert (info["n_best_size"], info["max_answer_length"]) == (
        recorded.get("n_best_size", 20), recorded.get("max_answer_length", 30))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_every_door_answers_as_predictions_json(folder, doors, version):
    doors = dict(doors[version], version=version)
    files, saved = doors["files"], doors["saved"]
    assert len(files) == len(folder["questions"])
    counts = _windows(folder)
    np.testing.assert_array_equal(saved["num_windows"], counts)
    mismatches = []
    for i, (want, want_score) in enumerate(files[str(i)] for i in range(len(files))):
        got = {"saved": (saved["answer"][i].decode("utf-8"), float(saved["score"][i])),
               "litert": (doors["litert"][i]["text"],
                          _score_of(doors["litert"][i]["nbest"], doors["litert"][i]["text"])),
               "python": (doors["python"][i]["text"],
                          _score_of(doors["python"][i]["nbest"], doors["python"][i]["text"]))}
        for door, (text, score) in got.items():
            if text != want or abs(score - want_score) > SCORE_TOL:
                mismatches.append((door, i, counts[i], want, text, want_score, score))
    assert not mismatches, mismatches
    texts = [files[str(i)][0] for i in range(len(files))]
    assert texts[2] == texts[len(CASES) - 1]  # the duplicate
    if doors["version"] == "v1":
        assert texts[14:17] == ["empty"] * 3  # no window: run_squad's placeholder
        assert len(set(texts)) > 5
    else:
        assert texts[14:17] == [""] * 3
        assert 0 < texts.count("") < len(texts)  # both kinds: the null rule is exercised


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_null_odds_and_positions(folder, doors, version):
    """null_odds is null_odds.json's (SQuAD 2.0); positions point into the chosen window."""
    doors = dict(doors[version], version=version)
    saved = doors["saved"]
    if doors["version"] == "v2":
        with open(folder["root"] / "predict_v2" / "null_odds.json", encoding="utf-8") as f:
            odds = json.load(f)
        np.testing.assert_allclose(saved["null_odds"],
                                   [odds[str(i)] for i in range(len(odds))], atol=1e-4)
    start, end = saved["start_position"], saved["end_position"]
    window, count = saved["window"], saved["num_windows"]
    found = start >= 0
    assert ((window >= 0) == found).all() and (window[found] < count[found]).all()
    assert (end[found] >= start[found]).all() and (end[found] - start[found] < 30).all()
    assert (window[found] > 0).any()  # some answers come from a later window


def test_rules_refuse_what_answer_cannot_do():
    with pytest.raises(ValueError, match="^--doc_stride must be an integer >= 1, got 0$"):
        serving_squad.SquadRules(doc_stride=0).check(SEQ)
    with pytest.raises(ValueError, match="must be greater than max_query_length"):
        serving_squad.SquadRules(max_query_length=SEQ - 3).check(SEQ)


def test_trimmed_answers_with_litert_are_refused(folder):
    """LiteRT's answers rank padding positions as run_squad's default; a --trim_padding
    answer() ranks real ones only: the two together are refused before any work."""
    export_dir = folder["root"] / "refused"
    with pytest.raises(ValueError, match="^--trim_padding with --litert: the squad head's "
                                         "LiteRT door ranks every position"):
        esm.run(flags_common.parse_flags(esm.define_flags, [
            "--init_checkpoint=%s" % folder["out"], "--export_dir=%s" % export_dir,
            "--trim_padding", "--litert=fp32"]))
    assert not export_dir.exists()
