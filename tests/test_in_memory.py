"""Data and predictions in memory: data_dir as a dict of tables, predict() of a folder."""
import json
import os

import pytest

import run_classifier as rc
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import file_data
from conftest import FP32_ATOL, write_text

_WORDS = ["good", "bad", "fine", "awful", "great", "dull", "film", "plot", "very", "not"]
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02}


def _rows(count, offset, labels=True):
    rows = []
    for i in range(count):
        words = [_WORDS[(i * 3 + offset + k) % len(_WORDS)] for k in range(1 + i % 4)]
        row = {"text": " ".join(words)}
        if labels:
            row["label"] = ("pos", "neg")[(i + offset) % 2]
        rows.append(row)
    return rows


_TABLES = {"train": _rows(12, 0), "dev": _rows(5, 1), "test": _rows(5, 2, labels=False)}


def _columns(rows):
    return {key: [r[key] for r in rows] for key in rows[0]}


def _settings(root, data_dir, out, **extra):
    values = dict(task_name="jsonl", data_dir=data_dir,
                  vocab_file=write_text(root / "vocab.txt", "".join(t + "\n" for t in _VOCAB)),
                  bert_config_file=write_text(root / "config.json", json.dumps(_CONFIG)),
                  output_dir=str(out), max_seq_length=16, train_batch_size=4,
                  num_train_epochs=1.0, learning_rate=1e-3, eval_batch_size=4,
                  predict_batch_size=4, seed=1)
    values.update(extra)
    return rc.Settings(**values)


def _read(path):
    with open(str(path), encoding="utf-8") as f:
        return f.read()


def _assert_same_files(folder, other, names):
    """Each of `names` holds the same text in `folder` and in `other`."""
    for name in names:
        assert _read(folder / name) == _read(other / name), name


# ---------------------------------------------------------------------------
# The tables read as the files
# ---------------------------------------------------------------------------

def test_tables_give_the_examples_of_the_same_rows_in_a_file(tmp_path):
    rows = [{"id": 7, "text": "good film", "pair": "x", "label": 1},
            {"text": "bad", "pair": "", "label": "neg"}]
    write_text(tmp_path / "train.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    columns = file_data.Columns("text", "pair", "label")
    expected = file_data.FileProcessor("jsonl", columns).get_train_examples(str(tmp_path))
    as_dict = {"id": [7, None], "text": ["good film", "bad"], "pair": ["x", ""],
               "label": [1, "neg"]}
    for table in (rows, as_dict, tuple(rows)):
        processor = file_data.FileProcessor("csv", columns)
        got = processor.get_train_examples({"train": table})
        assert [vars(e) for e in got] == [vars(e) for e in expected]
        assert [e.guid for e in got] == [7, "train-1"]
        assert processor.get_labels() == ["1", "neg"]  # the number 1 as JSON writes it


def test_a_dataframe_is_read_by_its_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    frame = pd.DataFrame({"text": ["good", "bad film"], "label": np.array([1, 0])})
    processor = file_data.FileProcessor("jsonl", file_data.Columns("text", None, "label"))
    got = processor.get_train_examples({"train": frame})
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in got] == [
        ("train-0", "good", None, "1"), ("train-1", "bad film", None, "0")]
    assert data_tables.native(np.int64(3)) == 3 and type(data_tables.native(np.int64(3))) is int


@pytest.mark.parametrize("data_dir, message", [
    ({"train": [{"text": "a", "label": "x"}, {"txt": "b", "label": "y"}]},
     r"data_dir\['train'\] row 2 \(from 1\): no column 'text' \(text_a_column.*'txt', 'label'"),
    ({"train": {"text": ["a", "b"], "label": ["x"]}},
     r"data_dir\['train'\]: column 'text' has 2 values, column 'label' has 1"),
    ({"train": [{"text": "a", "label": "x"}], "validation": []},
     r"data_dir: unknown split 'validation'; the splits are 'train', 'dev', 'test'"),
    ({"train": [{"text": "a", "label": "x"}, {"text": 3.5, "label": "y"}]},
     r"data_dir\['train'\] row 2 \(from 1\): 'text' is 3.5, not a text"),
    ({"train": [{"text": "a", "label": "x"}, ["b", "y"]]},
     r"data_dir\['train'\] row 2 \(from 1\) is a list; expected a dict"),
    ({"train": "train.csv"}, r"data_dir\['train'\] is a str; expected a pandas DataFrame"),
    ({"test": []}, r"data_dir has no 'train' table \(do_train=True needs it\)"),
    (["train"], r"data_dir=\['train'\]: expected a string or a path, or \(from Python\) a "
              r"dict of splits"),
])
def test_a_bad_table_is_one_error_naming_it_and_nothing_is_written(tmp_path, data_dir,
                                                                    message):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=message):
        rc.run(_settings(tmp_path, data_dir, out, do_train=True))
    assert not out.exists()


def test_tables_are_for_the_file_tasks_only(tmp_path):
    with pytest.raises(ValueError, match="data_dir as a dict of tables is read by "
                                         "task_name=csv, tsv and jsonl only, not "
                                         "task_name=mrpc"):
        rc.run(_settings(tmp_path, {"train": []}, tmp_path / "out", task_name="mrpc",
                         do_train=True))
    assert not (tmp_path / "out").exists()


def test_a_predictor_needs_a_training_folder_of_its_runner(tmp_path):
    with pytest.raises(ValueError, match="is not the output folder of a run_classifier "
                                         "training run \\(its model_settings.json is "
                                         "missing\\)"):
        rc.Predictor(str(tmp_path))
    write_text(tmp_path / "model_settings.json", json.dumps({"runner": "run_ner"}))
    with pytest.raises(ValueError, match="its model_settings.json names run_ner"):
        rc.predict(str(tmp_path), ["a text"])


def test_texts_of_checks_the_predict_arguments():
    assert data_tables.texts_of("one text") == (["one text"], None)
    assert data_tables.texts_of(("a", "b"), ["c", "d"]) == (["a", "b"], ["c", "d"])
    assert data_tables.texts_of([]) == ([], None)
    with pytest.raises(ValueError, match="texts_b has 1 texts, texts has 2: as many"):
        data_tables.texts_of(["a", "b"], ["c"])
    with pytest.raises(ValueError, match=r"texts\[1\] is an int \(1\), not a str"):
        data_tables.texts_of(["a", 1])
    # What was given, named as it is (a NaN was "a NoneType", pandas' NA too).
    with pytest.raises(ValueError, match=r"^texts_b\[1\] is NaN \(a missing value\), not a str$"):
        data_tables.texts_of(["a", "b"], ["c", float("nan")])
    with pytest.raises(ValueError, match=r"^texts\[0\] is None, not a str$"):
        data_tables.texts_of([None])
    with pytest.raises(ValueError, match="texts is a int; expected a str or a list of str"):
        data_tables.texts_of(5)


# ---------------------------------------------------------------------------
# A table run and a file run: the same numbers; predict() of the folder: do_predict's
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run trained, evaluated and predicting from tables (dev as columns), and its
    checkpoint evaluated and predicting the same rows from files. (A training from a file
    of the same rows: test_tables_give_the_examples_of_the_same_rows_in_a_file shows the
    tables give it the same examples.)"""
    root = tmp_path_factory.mktemp("in_memory")
    files = root / "files"
    for split, rows in _TABLES.items():
        write_text(files / ("%s.jsonl" % split), "".join(json.dumps(r) + "\n" for r in rows))
    tables = {"train": _TABLES["train"], "dev": _columns(_TABLES["dev"]),
              "test": _TABLES["test"]}
    result = rc.run(_settings(root, tables, root / "table_run", do_train=True, do_eval=True,
                              do_predict=True))
    rc.run(_settings(root, str(files), root / "file_run", do_eval=True, do_predict=True,
                     init_checkpoint=str(root / "table_run")))
    return {"root": root, "file_run": root / "file_run", "table_run": root / "table_run",
            "result": result}


@pytest.mark.slow
def test_a_table_run_writes_what_the_file_run_writes(runs):
    _assert_same_files(runs["table_run"], runs["file_run"], (
        "eval_results.txt", "test_results.tsv", "test_predictions.jsonl"))
    # The labels of the train table, as a file of its rows gives them.
    labels = file_data.FileProcessor("jsonl", file_data.Columns("text", None, "label"))
    labels.get_train_examples(str(runs["root"] / "files"))
    assert _read(runs["table_run"] / "label_list.txt") == "".join(
        label + "\n" for label in labels.get_labels()) == "neg\npos\n"
    assert runs["result"].metrics["global_step"] == 3  # int(12 / 4 * 1.0)
    assert len(_read(runs["table_run"] / "test_results.tsv").splitlines()) == 5


def _assert_agrees(got, want):
    """The same labels (and every other field), probabilities within FP32_ATOL: predict()
    batches otherwise than do_predict, and GEMM rounding follows the batch's shape."""
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert set(g) == set(w), (g, w)
        for key in w:
            if key != "probabilities":
                assert g[key] == w[key], (key, g, w)
                continue
            a, b = g[key], w[key]
            if isinstance(w[key], dict):
                assert set(a) == set(b)
                a, b = [a[k] for k in sorted(b)], [b[k] for k in sorted(b)]
            assert max(abs(x - y) for x, y in zip(a, b)) <= FP32_ATOL, (g, w)


@pytest.mark.slow
def test_predict_of_the_folder_is_what_do_predict_wrote(runs):
    folder = str(runs["table_run"])
    written = [json.loads(line) for line in
               _read(runs["table_run"] / "test_predictions.jsonl").splitlines()]
    expected = [{"label": r["label"], "probabilities": r["probabilities"]} for r in written]
    texts = [r["text"] for r in _TABLES["test"]]
    before = sorted(os.listdir(folder))
    predictor = rc.Predictor(folder, batch_size=2)  # other batches: the same numbers
    try:
        _assert_agrees(predictor.predict(texts), expected)
        _assert_agrees(predictor.predict(texts[3]), expected[3:4])  # a str: one text
        assert predictor.predict([]) == []
        with pytest.raises(ValueError, match="texts_b has 1 texts, texts has 2"):
            predictor.predict(texts[:2], ["x"])
        with pytest.raises(ValueError, match="texts_b: the model of .* was trained on single "
                                             "texts"):
            predictor.predict(texts[:1], ["x"])
        pd = pytest.importorskip("pandas")
        # Its text_b column used to go unread without a word.
        with pytest.raises(ValueError, match=r"^texts is a DataFrame with a text_b column, but "
                                             r"the model of .* was trained on single texts \(no "
                                             r"--text_b_column\): drop the column$"):
            predictor.predict(pd.DataFrame({"text": texts[:2], "text_b": ["x", "y"]}))
        _assert_agrees(predictor.predict(pd.DataFrame({"text": texts[:2]})), expected[:2])
    finally:
        predictor.close()
    _assert_agrees(rc.predict(folder, texts[:2]), expected[:2])
    assert sorted(os.listdir(folder)) == before  # predict() writes nothing in the folder


# ---------------------------------------------------------------------------
# run_ner: sentences in memory, predict() of a folder
# ---------------------------------------------------------------------------

def _sentences(conll_text):
    """The (word, tag) pairs of each sentence of a two-column CoNLL text."""
    return [[tuple(line.split()) for line in block.splitlines()]
            for block in conll_text.strip().split("\n\n")]


def test_sentences_in_memory_are_the_file_of_the_same_lines(tmp_path):
    from bert_tf2.tasks import ner_data  # pylint: disable=import-outside-toplevel
    from test_ner_data import IOB2  # pylint: disable=import-outside-toplevel
    path = write_text(tmp_path / "train.txt", IOB2)
    from_file = ner_data.read_conll(path)
    in_memory = ner_data.conll_of_sentences(_sentences(IOB2), "data_dir['train']")
    assert in_memory.sentences == from_file.sentences
    assert in_memory.lines == from_file.lines[:len(in_memory.lines)]
    words = ner_data.conll_of_sentences([["John", "lives"], "in  Paris ."], "s",
                                        require_tags=False)
    assert [s.words for s in words.sentences] == [["John", "lives"], ["in", "Paris", "."]]
    assert not words.has_tags and words.lines == ["John", "lives", "", "in", "Paris", "."]
    for sentences, message in [
            ([[("John", "B-PER"), ("Smith",)]], r"sentence 0 word 1 is \('Smith',\); "
                                                r"expected a \(word, tag\) pair"),
            ([[("John", "B-PER")], [("New York", "B-LOC")]],
             r"sentence 1 word 0: the word 'New York' is not one word"),
            ([[("John", 3)]], r"sentence 0 word 0: the tag 3 is not one word"),
            ([[]], r"sentence 0 is \[\]; expected a non-empty list"),
            ("John B-PER", r"data_dir\['train'\] is a str; expected a list of sentences")]:
        with pytest.raises(ValueError, match=message):
            ner_data.conll_of_sentences(sentences, "data_dir['train']")


@pytest.fixture(scope="module")
def ner_runs(trained_ner_crf, tmp_path_factory):
    """The run's shared --crf tagger trained, evaluated and tagging from tables
    (tests/trained.py's trained_ner_crf: IOB2's sentences in memory; only read here), and
    its checkpoint evaluated and tagging the same sentences from files."""
    import run_ner  # pylint: disable=import-outside-toplevel
    from test_ner_data import IOB2  # pylint: disable=import-outside-toplevel
    root = tmp_path_factory.mktemp("ner_in_memory")
    common = dict(vocab_file=str(trained_ner_crf / "vocab.txt"),
                  bert_config_file=str(trained_ner_crf / "bert_config.json"),
                  max_seq_length=16, doc_stride=8, eval_batch_size=3, predict_batch_size=3,
                  crf=True)
    words = [[w for w, _ in s] for s in _sentences(IOB2)]
    rc_out = trained_ner_crf / "out"
    files = root / "files"
    write_text(files / "dev.txt", IOB2)
    write_text(files / "test.txt", "\n\n".join("\n".join(s) for s in words) + "\n")
    run_ner.run(run_ner.Settings(data_dir=str(files), output_dir=str(root / "file_eval"),
                                 init_checkpoint=str(rc_out), do_eval=True, do_predict=True,
                                 **common))
    return {"module": run_ner, "tables": rc_out, "file_eval": root / "file_eval",
            "words": words}


@pytest.mark.slow
def test_ner_tables_and_files_give_the_same_results(ner_runs):
    # The file run evaluates the table run's checkpoint: the same step, the same numbers.
    _assert_same_files(ner_runs["tables"], ner_runs["file_eval"], (
        "eval_results.txt", "eval_predictions.txt", "test_predictions.txt"))


@pytest.mark.slow
def test_ner_predict_is_what_do_predict_wrote_with_the_crf(ner_runs):
    run_ner = ner_runs["module"]
    blocks = _read(ner_runs["tables"] / "test_predictions.txt").strip().split("\n\n")
    expected = [[tuple(line.split()) for line in block.splitlines()] for block in blocks]
    words = ner_runs["words"]
    tagger = run_ner.Predictor(str(ner_runs["tables"]), batch_size=2)
    try:
        assert tagger.predict(words) == expected
        assert tagger.predict([" ".join(words[1])]) == expected[1:2]  # a str: split at blanks
        assert tagger.predict([]) == []
        with pytest.raises(ValueError, match="sentences is a str; expected a list"):
            tagger.predict("John lives in Paris")
    finally:
        tagger.close()
    assert run_ner.predict(str(ner_runs["tables"]), words[:1]) == expected[:1]


# ---------------------------------------------------------------------------
# run_squad: SQuAD dicts in memory, predict() of a folder
# ---------------------------------------------------------------------------

_CONTEXTS = ["the man went to the store and bought a gallon of milk .",
             "john smith was the leader of the japanese electronics industry .",
             "steve bought a house in japan in 1895 ."]
_QUESTIONS = [("what did the man buy ?", "a gallon of milk", 0),
              ("who was the leader ?", "john smith", 1),
              ("what did steve buy ?", "a house", 2),
              ("where did the man go ?", "the store", 0)]


def _squad():
    """A SQuAD object: one paragraph per question, the ids "0", "1", ..."""
    data = []
    for i, (question, answer, c) in enumerate(_QUESTIONS):
        context = _CONTEXTS[c]
        data.append({"title": str(i), "paragraphs": [{"context": context, "qas": [{
            "id": str(i), "question": question,
            "answers": [{"text": answer, "answer_start": context.index(answer)}]}]}]})
    return {"version": "1.1", "data": data}


@pytest.fixture(scope="module")
def squad_runs(trained_squad_v1, tmp_path_factory):
    """The run's shared SQuAD 1.1 folder (tests/trained.py's trained_squad_v1: trained from
    a dict in memory; only read here), its checkpoint predicting the same questions once
    from a dict and once from a file, with its own lengths."""
    import run_squad  # pylint: disable=import-outside-toplevel
    root = tmp_path_factory.mktemp("squad_in_memory")
    model = trained_squad_v1.folder
    common = dict(init_checkpoint=str(model), do_predict=True, predict_batch_size=3,
                  n_best_size=5, **{k: v for k, v in trained_squad_v1.settings().items()
                                    if k != "n_best_size"})
    run_squad.run(run_squad.Settings(predict_file=_squad(), output_dir=str(root / "dicts"),
                                     **common))
    path = write_text(root / "dev.json", json.dumps(_squad()))
    run_squad.run(run_squad.Settings(predict_file=path, output_dir=str(root / "file"),
                                     **common))
    return {"module": run_squad, "model": str(model), "dicts": root / "dicts",
            "file": root / "file"}


def test_a_bad_squad_dict_is_one_error_naming_the_setting(tmp_path):
    import run_squad  # pylint: disable=import-outside-toplevel
    settings = dict(vocab_file=write_text(tmp_path / "v.txt", "\n".join(_VOCAB) + "\n"),
                    bert_config_file=write_text(tmp_path / "c.json", json.dumps(_CONFIG)),
                    output_dir=str(tmp_path / "out"), do_predict=True, max_seq_length=32,
                    doc_stride=8, max_query_length=12)
    for predict_file, message in [
            ({"version": "1.1"}, r"predict_file \(a dict\) is not SQuAD json: it has no "
                                 r"\"data\" list at the top \(keys: 'version'\)"),
            ({"data": [{"paragraphs": [{"context": "a b", "qas": [{"id": "1"}]}]}]},
             r"predict_file \(a dict\), question 1: missing key 'question'"),
            (["data"], r"predict_file=\['data'\]: expected a string or a path, or \(from Python\) "
                        r"a SQuAD json's parsed object")]:
        with pytest.raises(ValueError, match=message):
            run_squad.run(run_squad.Settings(predict_file=predict_file, **settings))
        assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_squad_dicts_and_files_give_the_same_answers(squad_runs):
    _assert_same_files(squad_runs["dicts"], squad_runs["file"], (
        "predictions.json", "nbest_predictions.json", "eval_results.txt"))


@pytest.mark.slow
def test_squad_predict_is_what_do_predict_wrote(squad_runs):
    run_squad = squad_runs["module"]
    with open(str(squad_runs["dicts"] / "predictions.json")) as f:
        answers = json.load(f)
    with open(str(squad_runs["dicts"] / "nbest_predictions.json")) as f:
        nbest = json.load(f)
    questions = [q for q, _, _ in _QUESTIONS]
    contexts = [_CONTEXTS[c] for _, _, c in _QUESTIONS]
    # n_best_size is no setting of the folder: given as the runs had it.
    reader = run_squad.Predictor(squad_runs["model"], batch_size=2, n_best_size=5)
    try:
        got = reader.predict(questions, contexts)
        assert [g["text"] for g in got] == [answers[str(i)] for i in range(len(questions))]
        assert [g["nbest"] for g in got] == [nbest[str(i)] for i in range(len(questions))]
        for g in got:
            assert g["probability"] == next(e["probability"] for e in g["nbest"]
                                            if e["text"] == g["text"])
        assert reader.predict(questions[1], contexts[1]) == got[1:2]
        assert reader.predict([], []) == []
        _assert_squad_shapes(reader, questions, contexts, got)
        with pytest.raises(ValueError, match="contexts has 1 texts, questions has 2"):
            reader.predict(questions[:2], contexts[:1])
    finally:
        reader.close()
    assert run_squad.predict(squad_runs["model"], questions[:1], contexts[:1],
                             n_best_size=5) == got[:1]


def _assert_squad_shapes(reader, questions, contexts, got):
    """A SQuAD table's DataFrame (question, context), Series and arrays give the answers
    of the lists; other shapes are one line."""
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    frame = pd.DataFrame({"id": range(len(questions)), "question": questions,
                          "context": contexts})
    assert reader.predict(frame) == got
    assert reader.predict(pd.Series(questions), np.array(contexts)) == got
    for arguments, message in [
            ((None, contexts), r"^questions is None; expected a list \(or tuple\) of str"),
            ((set(questions), contexts), r"^questions is a set; .*a set has no order"),
            ((questions, {"c": contexts}), r"^contexts is a dict; expected a list"),
            ((frame, contexts), r"^contexts is given beside the DataFrame questions"),
            ((frame[["id", "question"]],), r"^contexts is missing: one context per question"),
            ((questions,), r"^contexts is missing: one context per question")]:
        with pytest.raises(ValueError, match=message):
            reader.predict(*arguments)


# ---------------------------------------------------------------------------
# run_multiple_choice: questions in memory, predict() of a folder
# ---------------------------------------------------------------------------

def _choices(count, offset, labels=True):
    rows = []
    for i in range(count):
        endings = [" ".join(_WORDS[(i + offset + k + j) % len(_WORDS)] for j in range(2))
                   for k in range(3)]
        row = {"context": _WORDS[(i * 7 + offset) % len(_WORDS)] + " film", "endings": endings,
               "question": "very" if i % 2 else ""}  # "" as a missing question
        if labels:
            row["label"] = (i + offset) % 3
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def choice_runs(trained_multiple_choice, tmp_path_factory):
    """The run's shared multiple-choice folder (tests/trained.py's trained_multiple_choice:
    trained from tables in memory; only read here), its checkpoint evaluated and predicting
    the same questions once from tables (dev as columns) and once from files."""
    import run_multiple_choice  # pylint: disable=import-outside-toplevel
    root = tmp_path_factory.mktemp("choice_in_memory")
    model = trained_multiple_choice.folder
    common = dict(task_name="jsonl", init_checkpoint=str(model), eval_batch_size=3,
                  predict_batch_size=3, do_eval=True, do_predict=True)
    tables = {"dev": _columns(_choices(4, 1)), "test": _choices(5, 2, labels=False)}
    run_multiple_choice.run(run_multiple_choice.Settings(
        data_dir=tables, output_dir=str(root / "tables"), **common))
    files = root / "files"
    for split in ("dev", "test"):
        rows = _choices(4, 1) if split == "dev" else tables["test"]
        write_text(files / ("%s.jsonl" % split), "".join(json.dumps(r) + "\n" for r in rows))
    run_multiple_choice.run(run_multiple_choice.Settings(
        data_dir=str(files), output_dir=str(root / "files_run"), **common))
    return {"module": run_multiple_choice, "model": str(model), "tables": root / "tables",
            "files_run": root / "files_run", "test": tables["test"]}


def test_bad_multiple_choice_tables_name_the_row(tmp_path):
    import run_multiple_choice  # pylint: disable=import-outside-toplevel
    settings = dict(task_name="jsonl", vocab_file=write_text(tmp_path / "v.txt", "\n".join(
        _VOCAB) + "\n"), bert_config_file=write_text(tmp_path / "c.json", json.dumps(_CONFIG)),
                    output_dir=str(tmp_path / "out"), do_train=True, max_seq_length=12)
    for data_dir, message in [
            ({"train": [{"context": "a", "endings": ["b", "c"], "label": 0},
                        {"context": "a", "endings": ["b"], "label": 0}]},
             r"data_dir\['train'\] row 2 \(from 1\): \"endings\" must be a list of two or more"),
            ({"train": [{"context": "a", "endings": ["b", "c"], "label": 2}]},
             r"data_dir\['train'\] row 1 \(from 1\): label 2 is not a choice index in \[0, 2\)"),
            ({"train": [{"context": "a", "endings": ["b", "c"], "label": True}]},
             r"data_dir\['train'\] row 1 \(from 1\): label True is a bool, not a choice "),
            ({"dev": []}, r"data_dir has no 'train' table \(do_train=True needs it\)")]:
        with pytest.raises(ValueError, match=message):
            run_multiple_choice.run(run_multiple_choice.Settings(data_dir=data_dir, **settings))
        assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="read by task_name=jsonl only, not task_name=swag"):
        run_multiple_choice.run(run_multiple_choice.Settings(
            data_dir={"train": []}, **dict(settings, task_name="swag")))


@pytest.mark.slow
def test_multiple_choice_tables_files_and_predict_agree(choice_runs):
    _assert_same_files(choice_runs["tables"], choice_runs["files_run"], (
        "eval_results.txt", "test_results.tsv", "test_predictions.jsonl"))
    written = [json.loads(line) for line in
               _read(choice_runs["tables"] / "test_predictions.jsonl").splitlines()]
    questions = choice_runs["test"]
    expected = [{"label": r["label"], "probabilities": r["probabilities"],
                 "ending": q["endings"][r["label"]]} for r, q in zip(written, questions)]
    module = choice_runs["module"]
    chooser = module.Predictor(choice_runs["model"], batch_size=2)
    try:
        _assert_agrees(chooser.predict(questions), expected)
        _assert_agrees(chooser.predict(questions[2]), expected[2:3])  # a dict: one question
        assert chooser.predict([]) == []
        pd = pytest.importorskip("pandas")
        assert questions[0]["question"] == ""  # as a missing one: a frame's NaN cell too
        frame = pd.DataFrame([{k: v for k, v in questions[0].items() if k != "question"}]
                             + questions[1:])
        _assert_agrees(chooser.predict(frame), expected)
        assert chooser.predict(tuple(questions)) == chooser.predict(pd.Series(questions))
        _assert_agrees(chooser.predict(tuple(questions)), expected)
        for bad, message in [(None, r"^questions is None; expected a list \(or tuple\) of "
                                    r"question dicts"),
                             ("a question", r"^questions is a str; expected a list"),
                             (3, r"^questions is an int; expected a list")]:
            with pytest.raises(ValueError, match=message):
                chooser.predict(bad)
    finally:
        chooser.close()
    _assert_agrees(module.predict(choice_runs["model"], questions[:2]), expected[:2])
