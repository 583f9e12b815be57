"""Fill-mask with a bert_config vocab_size larger than the vocabulary's tokens (issue 71's
defect: the small vocabulary of a clone without ../shared has duplicated lines). The
reference accepts such a config; an answer whose id no vocabulary entry has (an earlier
line of a duplicated token, a row past the file) is masked_lm.UNNAMED, its id kept, at
do_predict's Predictor and at the SavedModel; a vocabulary with ids past vocab_size is
refused in one line."""
import json

import numpy as np
import pytest
import tensorflow as tf

import export_saved_model
from bert_tf2 import heads
from bert_tf2.export import litert_predictor
from bert_tf2.export import masked_lm
from bert_tf2.trainer import checkpoints
from conftest import REQUIRE_DOORS, write_text
from trained import conversions_in_process

# ids: [PAD] 0 ... [MASK] 4; "a" on lines 5 and 7 (id 7: the last line wins), "b" 6,
# "c d" 8 (a token no word can give: a placeholder in an export's vocabulary asset).
_LINES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "a", "c d"]
_CONFIG = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 8, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
           "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 16,
           "type_vocab_size": 2, "initializer_range": 0.02}
# Output biases (their tied embedding rows zero) that decide every [MASK]'s answers: id 5
# (no token: "a"'s earlier line), then 8 ("c d"), 9 (a row past the vocabulary), 6 ("b").
_BIASES = {5: 30.0, 8: 25.0, 9: 20.0, 6: 10.0}


def _folder(root, vocab_size):
    """A pretraining checkpoint with bert_config.json and vocab.txt beside it."""
    config = dict(_CONFIG, vocab_size=vocab_size)
    write_text(root / "vocab.txt", "\n".join(_LINES) + "\n")
    write_text(root / "bert_config.json", json.dumps(config))
    model = heads.BertMaskedLM(_modeling_config(config))
    model(heads.dummy_features(), training=False)
    tensors = {name: var.numpy() for name, var in checkpoints.tf1_variable_map(model).items()}
    bias = np.zeros([vocab_size], np.float32)
    embeddings = tensors["bert/embeddings/word_embeddings"]
    for index, value in _BIASES.items():
        if index < vocab_size:
            bias[index] = value
            # the tied output row zero: this answer's logit is its bias, whatever the
            # (randomly initialised) encoder says
            embeddings[index] = 0.0
    tensors["cls/predictions/output_bias"] = bias
    return checkpoints.write_tf1_checkpoint(tensors, str(root / "bert_model.ckpt"))


def _modeling_config(config):
    import modeling  # pylint: disable=import-outside-toplevel
    return modeling.BertConfig.from_dict(config)


@pytest.mark.slow
def test_a_vocab_size_past_the_vocabulary_is_served_with_unnamed_answers(tmp_path):
    prefix = _folder(tmp_path, 10)  # 9 lines, 8 tokens, ids 0-8; rows 0-9
    predictor = masked_lm.Predictor(prefix, top_k=4, max_seq_length=8)
    answers = predictor.predict(["b [MASK] a"])
    (first,), = answers
    assert [(a["token"], a["token_id"]) for a in first] == [
        ("[UNK]", 5), ("c d", 8), ("[UNK]", 9), ("b", 6)]
    # softmax of the biases 30, 25, 20, 10 and six logits near zero (random tiny encoder)
    expected = np.exp([30.0, 25.0, 20.0, 10.0]) / (np.exp([30.0, 25.0, 20.0, 10.0]).sum() + 6)
    np.testing.assert_allclose([a["probability"] for a in first], expected, atol=1e-5)

    export_dir = str(tmp_path / "export")
    try:
        litert_predictor.check_available()
        litert = "fp32"
    except ValueError:
        if REQUIRE_DOORS:
            raise
        litert = None  # the [litert] extra is missing: the SavedModel door alone
    with conversions_in_process():  # the model is tested here, not the converting child
        export_saved_model.run(export_saved_model.Settings(
            init_checkpoint=prefix, export_dir=export_dir, model_type="masked_lm",
            max_seq_length=8, fill_mask_top_k=4, litert=litert))
    if litert:
        got = litert_predictor.LiteRTPredictor(export_dir, "fp32").predict(["b [MASK] a"])
        assert [(a["token"], a["token_id"]) for a in got[0][0]] == [
            (a["token"], a["token_id"]) for a in first]
    served = tf.saved_model.load(export_dir).signatures["serving_default"](
        text=tf.constant(["b [MASK] a"]))
    # "c d" by its name at every door (before: " 8", the asset's line, here; "[UNK]" at LiteRT)
    assert [t.decode("utf-8") for t in served["tokens"].numpy()[0][0]] == [
        "[UNK]", "c d", "[UNK]", "b"]
    assert served["token_ids"].numpy()[0][0].tolist() == [5, 8, 9, 6]
    np.testing.assert_allclose(served["probabilities"].numpy()[0][0],
                               [a["probability"] for a in first], atol=1e-5)


def test_a_vocabulary_past_vocab_size_is_refused_in_one_line(tmp_path):
    prefix = _folder(tmp_path, 8)  # ids up to 8, rows 0-7
    with pytest.raises(ValueError, match=r"has ids up to 8; .* says vocab_size 8: the model "
                                         r"has no row for ids past 7$"):
        masked_lm.Predictor(prefix)
