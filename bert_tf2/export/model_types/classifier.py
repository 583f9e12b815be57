"""The classifier's room: run_classifier's heads (single label, multi-label, regression,
long texts): its serving answers, export checks, LiteRT decoding and report, and its
converter answers (their bodies in tasks/classifier_tasks.py, long_text.py and
prediction_files.py, imported when called).
"""
from bert_tf2.export.model_types import base


class Classifier(base.ModelType):
    """run_classifier's heads: labels (single, multi-label), a regression value, long texts."""
    litert_info_fields = (("labels", "labels"),)

    def serving_outputs(self, module, model, features):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return module.classifier_answers(
            tf.cast(model(features, training=False)["logits"], tf.float32))

    def export_labels(self, settings):
        from bert_tf2.tasks import classifier_tasks  # pylint: disable=import-outside-toplevel
        return classifier_tasks.export_task(settings.part(*classifier_tasks.SETTINGS))

    def check_export(self, settings, multilabel):
        from bert_tf2.tasks import long_text  # pylint: disable=import-outside-toplevel
        if not multilabel:
            # As run_classifier: another mode's flags warned (one command line for every mode).
            settings.refuse_unused(long_text.unused_flags(long_text.from_settings(
                settings.part(*long_text.SETTINGS), settings.max_seq_length)), warn_only=True)

    def long_text_of(self, settings):
        # pylint: disable=import-outside-toplevel
        from bert_tf2.tasks import long_text
        from bert_tf2.tasks import multilabel_data
        if multilabel_data.is_multilabel(settings.task_name):
            return None
        result = long_text.from_settings(settings.part(*long_text.SETTINGS),
                                         settings.max_seq_length)
        return None if result.mode == "truncate" else result

    def long_text_mode(self, long_text):
        return long_text

    def unused_flags(self, settings, multilabel):
        pairs = [(name, why) for name, used, why in (
            ("threshold", multilabel, "without a multi-label classifier"),
            ("xnli_language", (settings.task_name or "").lower() == "xnli",
             "without --task_name=xnli")) if not used]
        if multilabel:
            pairs += [(name, "with a multi-label classifier (its runs read texts as truncate)")
                      for name in ("long_text", "head_tokens", "doc_stride", "window_pooling")]
        return pairs

    def litert_examples(self, path, tokenizer, max_seq_length, limit, labels, columns,
                        doc_stride, squad_rules):
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.table_batch(path, tokenizer, max_seq_length, limit, labels,
                                          columns, gold=True)

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        import numpy as np  # pylint: disable=import-outside-toplevel
        if "predictions" in outputs:
            return [float(x) for x in outputs["predictions"]]
        return [int(x) for x in np.argmax(outputs["probabilities"], axis=-1)]

    def litert_agreement(self, want, found, batch, labels, compared):
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        result = super().litert_agreement(want, found, batch, labels, compared)
        if batch.gold is not None and labels and len(labels) == 2:
            result["f1_fp32"] = litert_batches.f1_score(want, batch.gold)
            result["f1"] = litert_batches.f1_score(found, batch.gold)
        return result

    def _agreement(self, want, found):
        import numpy as np  # pylint: disable=import-outside-toplevel
        if want and isinstance(want[0], float):  # regression: within 0.1 of each other
            return float(np.mean(np.abs(np.subtract(want, found)) < 0.1))
        return super()._agreement(want, found)

    def _metric(self, found, batch):
        import numpy as np  # pylint: disable=import-outside-toplevel
        if found and isinstance(found[0], float):
            return "pearson", 100.0 * float(np.corrcoef(found, batch.gold)[0, 1])
        return "accuracy", 100.0 * float(np.mean(np.equal(found, batch.gold)))

    def hf_task(self, contents, found, init_checkpoint, labels_file, notes):
        from bert_tf2.tasks import classifier_tasks  # pylint: disable=import-outside-toplevel
        return classifier_tasks.hf_task(found, init_checkpoint, labels_file, notes)

    def task_type_of(self, problem_type, rows):
        from bert_tf2.tasks import classifier_tasks  # pylint: disable=import-outside-toplevel
        return classifier_tasks.task_type_of_hf(problem_type, rows)

    def keras_hub_task(self, contents, found, init_checkpoint, notes):
        from bert_tf2.tasks import classifier_tasks  # pylint: disable=import-outside-toplevel
        return classifier_tasks.keras_hub_task(found, init_checkpoint,
                                               contents.shapes[self.label_variable][0], notes)

    def keras_hub_files(self, preset_dir, output_dir, tensors):
        from bert_tf2.tasks import classifier_tasks  # pylint: disable=import-outside-toplevel
        return classifier_tasks.preset_files(preset_dir, output_dir,
                                             tensors[self.label_variable].shape[0])

    def _results(self, predictor, found, outputs, batch):
        # The shapes of run_classifier.predict.
        from bert_tf2.tasks import prediction_files  # pylint: disable=import-outside-toplevel
        if "predictions" in outputs:
            return [prediction_files.result(prediction_files.regression_record(None, x))
                    for x in found]
        return [prediction_files.result(prediction_files.classification_record(
            None, row, predictor.labels)) for row in outputs["probabilities"]]


ENTRY = Classifier(
    "classifier", "run_classifier",
    ("classifier", "multi-label classifier", "regression", "long-text classifier"),
    build=base.head_builder("BertClassifier", "num_labels"), listed_after="encoder",
    tf1=True, litert=True,
    # LiteRT's flags and messages name it first (its first door there).
    before=base.doors(litert=("encoder",)),
    litert_refused=("multi-label classifier", "long-text classifier"),
    labels=True, class_labels=True,
    litert_outputs=("probabilities", "logits", "predictions"),
    litert_compared=("predictions", "probabilities"),
    flags=("task_name", "xnli_language", "labels_file", "threshold", "long_text",
           "head_tokens", "doc_stride", "window_pooling"),
    hf_class="BertForSequenceClassification",
    hf_head_keys=(("output_weights", "classifier.weight"),
                  ("output_bias", "classifier.bias")),
    held_marks=("output_weights", "output_bias"), label_variable="output_weights",
    keras_hub_class="BertTextClassifier",
    keras_hub_weights=(("output_weights", "output_dense", "kernel"),
                       ("output_bias", "output_dense", "bias")))
