"""The multiple-choice room: run_multiple_choice's head (a context and its endings, a
probability per ending): its SavedModel signature and outputs, its HF class. LiteRT does
not carry it.
"""
from bert_tf2.export.model_types import base


class MultipleChoice(base.ModelType):
    """run_multiple_choice's head: a context and its endings, a probability per ending."""
    serving_functions = (
        ("serving_default", "choose", (("context", 1), ("endings", 2)), None),)

    def serving_outputs(self, module, model, features):
        # [B x C, S] rows: one batch through BERT, a score per row.
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        pooled = model.bert(features["input_ids"], features["input_mask"],
                            features["segment_ids"], training=False)["pooled_output"]
        return {"logits": tf.cast(model.scorer(pooled), tf.float32)[:, 0]}


ENTRY = MultipleChoice(
    "multiple_choice", "run_multiple_choice", ("multiple choice",),
    build=base.head_builder("BertMultipleChoice"), listed_after="tagger",
    signature="choices", hf_class="BertForMultipleChoice",
    hf_head_keys=(("multiple_choice/output_weights", "classifier.weight"),
                  ("multiple_choice/output_bias", "classifier.bias")),
    held_marks=("multiple_choice/output_weights", "multiple_choice/output_bias"))
