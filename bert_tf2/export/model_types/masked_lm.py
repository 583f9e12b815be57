"""The fill-mask room: the pretraining checkpoint's masked-LM head, top-k tokens per [MASK].
Its model, inputs, decoding, Predictor and SavedModel / LiteRT graph are
bert_tf2/export/masked_lm.py, which its methods call; its HF weights are the pretraining
head's first part (MASKED_LM_KEYS, which the pretraining room reads).
"""
from bert_tf2.export.model_types import base


class MaskedLM(base.ModelType):
    """Fill-mask: the pretraining checkpoint's masked-LM head, top-k tokens per [MASK]
    (bert_tf2/export/masked_lm.py: its model, inputs, decoding, Predictor and graph)."""
    serving_functions = (("serving_default", "fill_mask", (("text", 1),), None),)

    def serving_outputs(self, module, model, features):
        from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
        return masked_lm.top_k_outputs(model, features, module.mask_id, module.top_k)

    def serving_state(self, tokenizer, max_seq_length, squad_rules, top_k):
        # Answers per [MASK] (at most the vocabulary), [MASK]'s id, id -> piece.
        from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
        masked_lm.check_at_least(top_k, "top_k")
        return {"top_k": min(top_k, tokenizer.vocab_size),
                "mask_id": masked_lm.mask_id_of(tokenizer),
                "fill_tokens": tokenizer.token_table()}

    def export_info(self, module):
        from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
        return masked_lm.export_info(module.top_k, module.tokenizer)

    def export_defaults(self, settings, folder):
        # The fill-mask Predictor's and do_predict's length, so a long text is cut alike.
        from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
        if settings.given("max_seq_length"):
            return {}
        return {"max_seq_length": masked_lm.default_length(folder, settings.bert_config_file)}

    def export_labels(self, settings):
        from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
        masked_lm.check_at_least(settings.fill_mask_top_k, "--fill_mask_top_k")
        return None, False

    def litert_examples(self, path, tokenizer, max_seq_length, limit, labels, columns,
                        doc_stride, squad_rules):
        # The first `limit` texts with [MASK]s of the file (masked_lm.read_texts).
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.export import masked_lm
        texts = masked_lm.read_texts(path)[:limit]
        if not texts:
            raise ValueError("%s: no texts" % path)
        features, counts = masked_lm.litert_batch(texts, tokenizer, max_seq_length)
        return litert_batches.Batch(features, None, counts)

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
        return masked_lm.litert_token_ids(outputs, batch.extra)

    def litert_predict(self, predictor, texts, texts_b):
        # masked_lm.Predictor's texts and answers.
        from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
        if texts_b is not None:
            raise ValueError("fill-mask takes texts only: leave texts_b out")
        features, counts = masked_lm.litert_batch(
            masked_lm.texts_of(texts), predictor.tokenizer, predictor.max_seq_length)
        return masked_lm.litert_answers(predictor.run(features), counts, predictor)


# The masked-LM head's weights, TF1 name -> HF name: the pre-training head's first part and
# fill-mask's whole head.
MASKED_LM_KEYS = (
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight"),
    ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight"),
    ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias"),
    ("cls/predictions/output_bias", "cls.predictions.bias"),
)

ENTRY = MaskedLM(
    "masked_lm", None, ("masked lm",), build=base.head_builder("BertMaskedLM"),
    summary="fill-mask: a pretraining checkpoint's masked-LM head",
    listed_after="pretraining", litert=True, signature="fill_mask",
    sequence_axes=base.axes(token_ids=1, probabilities=1),
    litert_outputs=("token_ids", "probabilities", "num_masks"),
    litert_compared=("probabilities",), flags=("fill_mask_top_k",),
    part_of=("pretraining",), hf_class="BertForMaskedLM", hf_pooler=False,
    hf_head_keys=MASKED_LM_KEYS)
