"""The tagger's room: run_ner's heads (softmax, --crf, feature-based BiLSTM): word windows
and word tags, in the SavedModel's graph (export/serving_tagger.py), in LiteRT's decoding
(export/litert_batches.py) and in do_predict and the HF export (tasks/ner_data.py).
"""
from bert_tf2.export.model_types import base
from bert_tf2.export.model_types import litert_door


class Tagger(base.ModelType):
    """run_ner's heads (softmax, --crf, feature-based BiLSTM): word windows, word tags."""
    # The prefix of a feature-based tagger's variables (heads.BertTagger's BiLSTM), which no
    # HuggingFace or keras-hub class holds.
    feature_based_prefix = "bilstm_"

    def feature_based(self, names):
        """Whether a tagger checkpoint's TF1 variable `names` are a feature-based one's."""
        return any(name.startswith(self.feature_based_prefix) for name in names)
    serving_functions = (("serving_default", "tag", (("text", 1),), None),)
    litert_info_fields = (("labels", "labels"), ("crf", "bool"), ("doc_stride", "count"))

    def serving_outputs(self, module, model, features):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return {"logits": tf.cast(model(features, training=False)["logits"], tf.float32)}

    def export_info(self, module):
        return {"crf": module.crf, "crf_tag_scheme": module.crf_tag_scheme,
                "doc_stride": module.doc_stride}  # its windows, LiteRTPredictor's too

    def export_labels(self, settings):
        """The tag list: --labels_file (in the order of the folder's: label_order), else the
        label_list.txt run_ner left beside --init_checkpoint."""
        # pylint: disable=import-outside-toplevel
        from bert_tf2.tasks import label_order
        from bert_tf2.tasks import ner_data
        from bert_tf2.trainer import checkpoints
        labels = label_order.read_labels_file(settings.labels_file, checkpoints.settings_file(
            ner_data.LABELS_FILE_NAME, settings.init_checkpoint), ner_data.read_labels)
        if labels is None:
            raise ValueError("--model_type=tagger needs the tag list: pass --labels_file "
                             "(no %s beside --init_checkpoint)" % ner_data.LABELS_FILE_NAME)
        return labels, False

    def export_kwargs(self, settings, folder, saved_pooling, bert_config):
        from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
        layers = ([int(x) for x in settings.layers.split(",")]
                  if settings.feature_based else None)
        # --crf_tag_scheme of a --crf tagger: given, else (auto) the folder's, else none.
        scheme, saved = settings.crf_tag_scheme, folder.get("crf_tag_scheme")
        if not settings.crf:
            scheme = "none"
        elif scheme == "auto":
            scheme = saved if saved in heads.TAG_SCHEMES[1:] else "none"
        return {"feature_layers": layers, "crf": settings.crf, "crf_tag_scheme": scheme,
                "doc_stride": settings.doc_stride}

    def unused_flags(self, settings, multilabel):
        if settings.feature_based:
            return []
        return [("layers", "without --feature_based"), ("lstm_units", "without --feature_based")]

    def litert_examples(self, path, tokenizer, max_seq_length, limit, labels, columns,
                        doc_stride, squad_rules):
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.conll_file_batch(path, tokenizer, max_seq_length, limit, labels,
                                               doc_stride)

    def litert_file_settings(self, settings):
        return {"doc_stride": settings.doc_stride}

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.tasks import ner_data
        conll, features = batch.extra
        return ner_data.sentence_predictions(
            conll, features, litert_batches.tag_ids(outputs, features, crf), labels)

    def litert_count(self, batch):
        return len(batch.extra[0].sentences)

    def litert_values(self, values):
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.softmax(values)  # per-position tag probabilities

    def _agreement(self, want, found):
        return litert_door.share_equal((a, b) for x, y in zip(want, found)
                                       for a, b in zip(x, y))

    def _metric(self, found, batch):
        import numpy as np  # pylint: disable=import-outside-toplevel
        pairs = [(a, b) for x, y in zip(found, batch.gold) for a, b in zip(x, y)]
        return "word_accuracy", 100.0 * float(np.mean([a == b for a, b in pairs]))

    def litert_batch(self, predictor, texts, texts_b):
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        if texts_b is not None:
            raise ValueError("a tagger takes sentences only: leave texts_b out")
        # run_ner's windows; an export made before doc_stride was recorded: its default.
        return litert_batches.tagger_batch(texts, predictor.tokenizer,
                                           predictor.max_seq_length, predictor.labels,
                                           predictor.info.get("doc_stride"))

    def hf_task(self, contents, found, init_checkpoint, labels_file, notes):
        from bert_tf2.tasks import ner_data  # pylint: disable=import-outside-toplevel
        return ner_data.hf_task(contents, found, init_checkpoint, labels_file, notes)

    def _results(self, predictor, found, outputs, batch):
        conll = batch.extra[0]
        return [list(zip(s.words, tags)) for s, tags in zip(conll.sentences, found)]


ENTRY = Tagger(
    "tagger", "run_ner", ("tagger softmax", "tagger crf", "tagger bilstm"),
    build=base.head_builder("BertTagger", "num_labels", "feature_layers", "lstm_units",
                            "crf", "crf_penalties"),
    listed_after="squad", litert=True,
    # Before the classifier at the export doors: its one mark was the first test of the
    # HF export's head (a checkpoint with both answers tagger); listed before SQuAD by the
    # HF export and LiteRT.
    before=base.doors(held=("classifier",), hf=("squad",), litert=("squad",)),
    signature="words", sequence_axes=base.axes(logits=1),
    labels=True, litert_outputs=("logits",), litert_compared=("logits",),
    flags=("labels_file", "feature_based", "layers", "lstm_units", "crf",
           "crf_tag_scheme", "doc_stride"),
    hf_class="BertForTokenClassification", hf_pooler=False,
    hf_head_keys=(("tagger/output_weights", "classifier.weight"),
                  ("tagger/output_bias", "classifier.bias")),
    held_marks=("tagger/output_weights",), label_variable="tagger/output_weights")
