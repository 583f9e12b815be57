"""The pretraining room: run_pretraining's heads (masked LM and next sentence). Its folders
are served as the encoder; the converters write it (TF1, HuggingFace's BertForPreTraining,
keras-hub's BertMaskedLM). Its masked-LM part is the masked_lm room's head (part_of).
"""
from bert_tf2.export.model_types import base
from bert_tf2.export.model_types import masked_lm


class Pretraining(base.ModelType):
    """run_pretraining's heads (masked LM and next sentence): converted, served as the
    encoder; its masked-LM part is MaskedLM's."""


# keras-hub's BertMaskedLM: where the masked-LM head's weights sit, and how it differs.
KERAS_HUB_MASKED_LM = (
    ("cls/predictions/transform/dense/kernel", "masked_lm_head._intermediate_dense", "kernel"),
    ("cls/predictions/transform/dense/bias", "masked_lm_head._intermediate_dense", "bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "masked_lm_head._intermediate_layer_norm",
     "gamma"),
    ("cls/predictions/transform/LayerNorm/beta", "masked_lm_head._intermediate_layer_norm",
     "beta"),
    ("cls/predictions/output_bias", "masked_lm_head", "_bias"),
)
KERAS_HUB_MASKED_LM_NOTE = (
    "keras-hub's BertMaskedLM computes its masked-LM transform with the exact erf GELU and "
    "LayerNorm epsilon 1e-5 (ours: tanh GELU, 1e-12) and has no next-sentence head: its "
    "logits differ slightly from ours and cls/seq_relationship is not written")

ENTRY = Pretraining(
    "pretraining", "run_pretraining", ("pretraining",),
    build=base.head_builder("BertPretrainer"), listed_after="multiple_choice",
    serves=False, tf1=True, served_as="encoder", hf_class="BertForPreTraining",
    hf_head_keys=masked_lm.MASKED_LM_KEYS + (
        ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight"),
        ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")),
    held_marks=("cls/predictions/output_bias", "cls/seq_relationship/output_weights"),
    keras_hub_class="BertMaskedLM", keras_hub_weights=KERAS_HUB_MASKED_LM,
    keras_hub_note=KERAS_HUB_MASKED_LM_NOTE)
