"""The encoder's room: BERT itself, any model folder's (export_saved_model
--model_type=encoder, its default). Per-position outputs and, with --pooling, sentence vectors
(its embed signature; LiteRT's answers, compared by cosine; the HF export's
sentence-transformers modules). It matches every checkpoint, so the doors that tell a
checkpoint's head try it last (head_types.door_orders) and it heads the lists of the types.
"""
from bert_tf2.export.model_types import base


class Encoder(base.ModelType):
    """The encoder (any folder's BERT): per-position outputs and, with --pooling, sentence
    vectors (its embed signature; LiteRT's answers, compared by cosine)."""
    serving_functions = base.ModelType.serving_functions + (
        ("embed", "embed", (("text", 1),), "pooling_spec"),)

    def serving_outputs(self, module, model, features):
        return module.encoder_outputs(model, features)

    def bucket_width(self, trim_padding):
        return None  # its outputs are per position: max_seq_length

    def export_kwargs(self, settings, folder, saved_pooling, bert_config):
        # sentence_embedding: the settings, else sentence_embedding.json, else mean.
        from bert_tf2.tasks import pooling  # pylint: disable=import-outside-toplevel
        mode = settings.pooling or saved_pooling.get("pooling", "mean")
        return {"pooling_spec": pooling.chosen_spec(settings.part("layers", "normalize"),
                                                    saved_pooling, mode,
                                                    bert_config.num_hidden_layers)}

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        import numpy as np  # pylint: disable=import-outside-toplevel
        return np.asarray(outputs["sentence_embedding"])

    def litert_agreement(self, want, found, batch, labels, compared):
        import numpy as np  # pylint: disable=import-outside-toplevel
        (ref,), (got,) = [values[:1] for values in compared]
        cosine = np.sum(ref * got, -1) / np.maximum(
            np.linalg.norm(ref, axis=-1) * np.linalg.norm(got, axis=-1), 1e-12)
        return {"agreement": float(cosine.mean()), "min_cosine": float(cosine.min())}

    def _no_results(self, predictor):
        import numpy as np  # pylint: disable=import-outside-toplevel
        return np.zeros([0, predictor.run.output_sizes["sentence_embedding"]], np.float32)

    def hf_sentence(self, init_checkpoint, notes):
        from bert_tf2.tasks import pooling  # pylint: disable=import-outside-toplevel
        return pooling.hf_export_settings(init_checkpoint, notes)


def build_encoder(bert_config, **unused):
    """The encoder's built Keras model (modeling.BertModel)."""
    from bert import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    model = modeling.BertModel(bert_config)
    dummy = heads.dummy_features()
    model(dummy["input_ids"], dummy["input_mask"], dummy["segment_ids"])
    return model


ENTRY = Encoder(
    "encoder", None, ("encoder", "sentence embedding"), build=build_encoder,
    summary="the bare encoder, any model folder's", listed_after=None, tf1=True, litert=True,
    checks_head=False, sentence_embedding=True, litert_outputs=("sentence_embedding",),
    litert_compared=("sentence_embedding",),
    sequence_axes=base.axes(sequence_output=1, encoder_layers=2, input_ids=1, input_mask=1,
                            segment_ids=1),
    flags=("layers", "pooling", "normalize"), hf_class="BertModel",
    hf_prefix="", keras_hub_class="BertBackbone")
