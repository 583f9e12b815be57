"""The ranker's room: run_ranker's cross-encoder, a (query, passage) pair -> one score.

Its model is the one-label classifier's (heads.BertClassifier with num_labels=1:
output_weights [1, H], output_bias [1]), so a ranker's checkpoint has a classifier's
variables: the doors that tell a head by its variables find the classifier (listed first),
a run_ranker model folder names its own type (model_settings.json's runner), which the
export and the HF export read, and a conversion of the ranker reads any checkpoint of its
layout (written_from). Its doors:
- SavedModel: serving_default (text_a: the query, text_b: the passage -> logits [B], the
  scores), serving_text_a, and `rank` (query [B], passages [B, C] -> logits [B, C],
  probabilities: their softmax over each query's candidates, predicted_choice: the best);
- LiteRT: the logits of serving_ids; LiteRTPredictor.predict(queries, passages) -> a score
  a pair (run_ranker.Predictor.predict's);
- HuggingFace: BertForSequenceClassification with one label, which sentence-transformers'
  CrossEncoder opens (its scores: sigmoid of these logits by default).
"""
from bert_tf2.export.model_types import base

# HuggingFace's tokenizer packs an empty second text otherwise (the HF export notes it).
EMPTY_PASSAGE_NOTE = ("an empty or blank passage: ours packs [CLS] query [SEP] (the "
                      "reference's rule), transformers' tokenizer [CLS] query [SEP] [SEP]: "
                      "its score differs there")


_CLASSIFIER = base.head_builder("BertClassifier", "num_labels")


def build_ranker(bert_config, **kwargs):
    """heads.BertClassifier with one label, whatever label count the export was given."""
    return _CLASSIFIER(bert_config, **dict(kwargs, num_labels=1))


class Ranker(base.ModelType):
    """run_ranker's head: a score per (query, passage) pair, and a query's candidates ranked."""
    serving_functions = base.ModelType.serving_functions + (
        ("rank", "choose", (("query", 1), ("passages", 2)), None),)

    def warmup_inputs(self, fields):
        # rank: a warm-up line's query with its passage as the one candidate.
        return {"query": fields[:1], "passages": [(fields[1:] or [b""])[:1]]}

    def written_from(self, held):
        # Its own checkpoint, or one whose head has its very variables (a one-label
        # classifier's: its shapes are checked when the weights are read).
        return super().written_from(held) or tuple(held.held_marks) == self.held_marks

    def serving_outputs(self, module, model, features):
        # [B, 1] -> [B]: the one logit is the pair's score (`rank` reshapes it [B, C]).
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return {"logits": tf.cast(model(features, training=False)["logits"], tf.float32)[:, 0]}

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        return [float(x) for x in outputs["logits"]]

    def _agreement(self, want, found):
        # Scores: the share within 0.1 of the SavedModel's (the regression rule).
        import numpy as np  # pylint: disable=import-outside-toplevel
        if not want:
            return 1.0
        return float(np.mean(np.abs(np.subtract(want, found)) < 0.1))

    def hf_task(self, contents, found, init_checkpoint, labels_file, notes):
        notes.append(EMPTY_PASSAGE_NOTE)
        return None, {"num_labels": 1}, None


ENTRY = Ranker(
    "ranker", "run_ranker", ("ranker",),
    build=build_ranker, listed_after="multiple_choice",
    summary="a run_ranker cross-encoder: a score per (query, passage)",
    litert=True, litert_outputs=("logits",), litert_compared=("logits",),
    hf_class="BertForSequenceClassification",
    hf_head_keys=(("output_weights", "classifier.weight"),
                  ("output_bias", "classifier.bias")),
    held_marks=("output_weights", "output_bias"))
