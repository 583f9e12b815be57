"""The heads: one class per model type a model folder or a door can hold (Encoder,
Classifier, Squad, Tagger, MultipleChoice, Pretraining, MaskedLM), each answering what the
doors ask of it, and ENTRIES, one instance of each (its data), at the end; the doors look
them up through head_types.

A ModelType holds a head's data (its docstring lists the fields) and the methods every
head shares (those of a head answering per text or pair of texts); a head's class
overrides what differs. The doors call the methods instead of branching on the type: the
SavedModel's signatures (serving_functions), outputs (serving_outputs), state
(serving_state), packing (bucket_width, long_text_mode) and export_info.json fields
(export_info); export_saved_model's defaults, labels, flags and checks (export_defaults,
export_labels, export_kwargs, unused_flags, check_export, answer_rules, long_text_of);
LiteRT's examples, decoding and report (litert_examples, litert_decode, litert_count,
litert_values, litert_agreement, litert_file_settings, litert_info_fields) and
LiteRTPredictor's answers (litert_batch, litert_predict, litert_answers); the converters'
(HF, keras-hub) checks, weights, labels and files and an export's checkpoint check
(written_from, hf_weights, hf_task, hf_sentence, task_type_of, keras_hub_task,
keras_hub_files, check_checkpoint). A head's bigger door code stays in its modules
(serving_tagger, serving_squad, masked_lm, litert_batches, tasks/ner_data, squad_results,
classifier_tasks, pooling), which its methods call.

This module imports nothing of the project at load time (LiteRTPredictor reads the registry
without TensorFlow); the methods import what they use when called, never a module that
imports this one or head_types (tests/test_layout.py: no import circle); the builders
import the models when called.
"""
import dataclasses
import types
from typing import Callable, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class ModelType:
    """A model type (export_saved_model / convert_tf1_checkpoint --model_type, a model
    folder's type) and what each door does with it.

    Fields:
      name: the --model_type value (export_info.json's model_type).
      runner: the runner whose model folders hold it (None: the encoder, any folder's).
      heads: the head types of it the project trains (documentation and tests).
      build: bert_config, num_labels=..., feature_layers=..., ... -> its built Keras model.
      serves: export_saved_model exports it (a SavedModel of raw strings).
      tf1_rank: convert_tf1_checkpoint converts it; --model_type=auto tries the types in
        this order (None: not converted).
      litert_rank: LiteRT carries it (--litert, LiteRTPredictor), listed in this order;
        None: refused.
      litert_refused: its heads LiteRT refuses all the same (litert_step.check says so).
      signature: which inputs serving_default takes: "pair" (text_a, text_b; also
        serving_text_a), "words" (text: serving_tagger's words and windows), "choices"
        (context, endings), "squad" (question, context; also answer), "fill_mask" (text
        with [MASK]s: masked_lm's graph).
      sequence_axes: outputs with a position axis, {name: axis} (static S at full length).
      trims_by_default: its requests are packed to their longest row by default (SQuAD:
        no, its n-best ranks padding positions as run_squad does).
      checks_head: an export refuses a checkpoint of another head (the encoder is served
        from any task's checkpoint).
      labels: its export holds a label list (classifier labels, tagger tags).
      class_labels: a classifier: its answers are labels (or regression values), gold
        labels come from a text file's label column.
      sentence_embedding: the encoder: its sentence_embedding output (--pooling); its
        LiteRT answers are these vectors, compared by cosine.
      litert_outputs: the numeric serving_ids outputs its LiteRT models keep.
      litert_compared: of those, the ones the LiteRT report compares (those present).
      flags: export_saved_model flags only this type (among the types) reads.
      served_as: the type its folders are exported as (run_pretraining's: the encoder).
      part_of: the types whose checkpoints hold this head too (the masked LM: the
        pretraining checkpoint's cls/predictions).
      hf_class: the transformers class of its HuggingFace export (config.json's
        architectures); None: not exported.
      hf_pooler: that class has the pooler (HF builds the token and span heads without).
      hf_head_keys: (TF1 variable name, HF state-dict key) of its head's weights.
      hf_rank: convert_hf_checkpoint --model_type lists it in this order (None: not
        exported to HuggingFace).
      hf_prefix: the prefix of the encoder's keys in its HF class ("": BertModel's own).
      held_rank: the order in which the export doors (HuggingFace, keras-hub) try the
        types on a checkpoint's variables (held_by; convert_tf1_checkpoint tries the
        tf1_rank order, detect_tf1); None: never told from them.
      held_marks: the TF1 variables that show a checkpoint holds this head (all of them:
        holds, the one rule); () : any checkpoint (the encoder, tried last).
      label_variable: the TF1 variable whose rows are its labels (its export checks
        their number against its label list); None: no label list.
      keras_hub_class: the keras-hub class of its preset (convert_keras_hub.py, both
        ways); None: keras-hub has none, the conversion refuses it.
      keras_hub_weights: (TF1 variable name, attribute path in the keras-hub model, its
        weight) of its head's weights (the encoder's are convert/keras_hub.py's).
      keras_hub_note: what keras-hub's class does differently (the export logs it).
    """
    name: str
    runner: Optional[str]
    heads: Tuple[str, ...]
    build: Optional[Callable] = None
    serves: bool = True
    tf1_rank: Optional[int] = None
    litert_rank: Optional[int] = None
    litert_refused: Tuple[str, ...] = ()
    signature: str = "pair"
    sequence_axes: types.MappingProxyType = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({}))
    trims_by_default: bool = True
    checks_head: bool = True
    labels: bool = False
    class_labels: bool = False
    sentence_embedding: bool = False
    litert_outputs: Tuple[str, ...] = ()
    litert_compared: Tuple[str, ...] = ()
    flags: Tuple[str, ...] = ()
    served_as: Optional[str] = None
    part_of: Tuple[str, ...] = ()
    hf_class: Optional[str] = None
    hf_pooler: bool = True
    hf_head_keys: Tuple[Tuple[str, str], ...] = ()
    hf_rank: Optional[int] = None
    hf_prefix: str = "bert."
    held_rank: Optional[int] = None
    held_marks: Tuple[str, ...] = ()
    label_variable: Optional[str] = None
    keras_hub_class: Optional[str] = None
    keras_hub_weights: Tuple[Tuple[str, str, str], ...] = ()
    keras_hub_note: Optional[str] = None

    @property
    def litert(self):
        """Whether LiteRT carries it."""
        return self.litert_rank is not None

    def carries_litert(self, head):
        """Whether --litert exports its head `head` (one of `heads`)."""
        if head not in self.heads:
            raise ValueError("%s has no head %r (its heads: %s)"
                             % (self.name, head, ", ".join(self.heads)))
        return self.litert and head not in self.litert_refused

    def holds(self, names):
        """Whether a checkpoint with TF1 variables `names` (a set) holds this head: its
        held_marks all there. The one rule every door and converter tells a head by
        (head_types.held_by, detect_tf1: each in its own order)."""
        return all(mark in names for mark in self.held_marks)

    # -- The converters (HuggingFace, keras-hub) and an export's checkpoint -------------
    def written_from(self, held):
        """Whether its conversion may read a checkpoint of head `held`: its own, one holding
        it (part_of), any (a type not checking the head)."""
        return not self.checks_head or held is self or held.name in self.part_of

    def check_checkpoint(self, model, init_checkpoint):
        """An export's refusal of a checkpoint holding another head's variables (the
        encoder is served from any task's checkpoint)."""
        from bert_tf2.trainer import checkpoints  # pylint: disable=import-outside-toplevel
        if self.checks_head:
            checkpoints.check_serves(model, init_checkpoint)

    def hf_weights(self, config):
        """({TF1 name: HF key}, {TF1 name: shape}) of its HF class's weights: the encoder's
        under hf_prefix, the pooler's when the class has one, its head's."""
        from bert_tf2.base import hf_names  # pylint: disable=import-outside-toplevel
        shapes = dict(hf_names.expected_shapes(config))
        names = list(shapes) + list(hf_names.POOLER_NAMES if self.hf_pooler else ())
        wanted = {name: self.hf_prefix + hf_names.hf_key_for(name) for name in names}
        wanted.update(self.hf_head_keys)
        shapes.update({name: shape for name, shape in hf_names.optional_shapes(config).items()
                       if name in wanted})
        return wanted, shapes

    # pylint: disable=unused-argument
    def hf_task(self, contents, found, init_checkpoint, labels_file, notes):
        """(labels or None, config.json fields, crf_transitions.json's dict or None) of its
        HF export of a model folder (`found`: model_folder.read's); HF's differences: `notes`."""
        return None, {}, None

    def hf_sentence(self, init_checkpoint, notes):
        """The sentence-transformers settings its HF export writes (None: none)."""
        return None

    def task_type_of(self, problem_type, rows):
        """The task_type an imported HF head of `rows` outputs records (None: none)."""
        return None

    def keras_hub_task(self, contents, found, init_checkpoint, notes):
        """(labels, its keras-hub task's arguments, {file: our path} its preset carries)."""
        return None, {}, {}

    def keras_hub_files(self, preset_dir, output_dir, tensors):
        """{name: path} of our files in its keras-hub preset that an import copies along."""
        return {}
    # pylint: enable=unused-argument

    # -- What each door asks the head (the subclasses below override) ------------------
    # The base methods are those of a head answering per text (pair): the encoder's and
    # the classifier's shape; the LiteRT ones run only for the types LiteRT carries.

    # serving.ServingModule's signatures: (name, its method `_<method>`, inputs as (name,
    # rank), the module attribute that must be set for it or None).
    serving_functions = (
        ("serving_default", "serve_pair", (("text_a", 1), ("text_b", 1)), None),
        ("serving_text_a", "serve_single", (("text_a", 1),), None))
    # export_info.json fields LiteRTPredictor checks: (field, kind of value).
    litert_info_fields = ()

    def serving_outputs(self, module, model, features):
        """Its model's outputs on packed `features` in a serving.ServingModule's graph."""
        raise NotImplementedError("%s is not served" % self.name)

    def serving_state(self, tokenizer, max_seq_length, squad_rules, top_k):
        """{attribute: value} a ServingModule of this head sets beyond the common ones."""
        del tokenizer, max_seq_length, squad_rules, top_k
        return {}

    def export_info(self, module):
        """The fields export_info.json records of this head's export beyond the common ones."""
        del module
        return {}

    def export_labels(self, settings):
        """(labels or None, multilabel) an export_saved_model of this head serves (its
        checks of its own settings first)."""
        del settings
        return None, False

    def export_defaults(self, settings, folder):
        """Defaults of export_saved_model's settings this head has beyond its model
        folder's (`folder`: model_folder.defaults)."""
        del settings, folder
        return {}

    def export_kwargs(self, settings, folder, saved_pooling, bert_config):
        """exporter.export's keyword arguments that only this head reads, from `settings`
        (`folder`: its model folder's defaults, `saved_pooling`: the sentence_embedding.json
        beside --init_checkpoint)."""
        del settings, folder, saved_pooling, bert_config
        return {}

    def long_text_of(self, settings):
        """The long_text.LongText (head_tail, windows) an export serves (None: truncate)."""
        del settings
        return None

    def long_text_mode(self, long_text):
        """The long_text.LongText its pair signatures cut texts by, of the one a
        ServingModule is given (None: truncate)."""
        del long_text
        return None

    def bucket_width(self, trim_padding):
        """The packing of its text signatures: a bucket width (trim_padding: requests
        packed to their longest row, rounded up), or None for max_seq_length."""
        from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
        return input_pipeline.DEFAULT_BUCKET_WIDTH if trim_padding else None

    def answer_rules(self, settings):
        """SQuAD's serving_squad.SquadRules of an export (None: not a SQuAD head)."""
        del settings
        return None

    def check_export(self, settings, multilabel):
        """An export's checks of this head's own flags (after the common ones)."""
        del settings, multilabel

    def unused_flags(self, settings, multilabel):
        """(flag, why) of this head's own flags an export of it would not read."""
        del settings, multilabel
        return []

    def litert_examples(self, path, tokenizer, max_seq_length, limit, labels, columns,
                        doc_stride, squad_rules):
        """A --calibration_file / --agreement_file's first `limit` examples: a
        litert_data.Batch (a table of texts, litert_batches.table_batch)."""
        del doc_stride, squad_rules
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.table_batch(path, tokenizer, max_seq_length, limit, labels,
                                          columns, gold=False)

    def litert_file_settings(self, settings):
        """litert_data.read_file's keyword arguments of this head, from `settings`."""
        del settings
        return {}

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        """Per-example predictions of LiteRT / SavedModel outputs on a litert_data.Batch."""
        raise ValueError("LiteRT does not carry --model_type=%s" % self.name)

    def litert_count(self, batch):
        """The number of examples of a litert_data.Batch."""
        return len(batch.features["input_ids"])

    def litert_values(self, values):
        """What the LiteRT report compares of an output (float64 array)."""
        return values

    def litert_agreement(self, want, found, batch, labels, compared):
        """The LiteRT report's agreement (and metric) fields: `want` / `found` decoded from
        the SavedModel's / the variant's outputs, `compared` their (reference, got)
        arrays."""
        del labels, compared
        result = {"agreement": self._agreement(want, found)}
        if batch.gold is not None:
            result["metric_name"], result["metric_fp32"] = self._metric(want, batch)
            result["metric"] = self._metric(found, batch)[1]
        return result

    def _agreement(self, want, found):
        """The share of equal predictions."""
        return _share_equal(zip(want, found))

    def _metric(self, found, batch):
        """(name, value in %) of predictions against the batch's gold labels."""
        raise ValueError("%s examples have no gold labels" % self.name)

    def litert_batch(self, predictor, texts, texts_b):
        """The litert_data.Batch of what LiteRTPredictor.predict() is given, read as the
        runner's Predictor.predict reads it (here: run_classifier's texts, texts_b)."""
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.tasks import data_tables
        from bert_tf2.tasks import predict_inputs
        texts, texts_b = data_tables.texts_of(*predict_inputs.text_pairs(
            texts, texts_b, ("texts", "texts_b"), [("text_a", "text_b")]))
        return litert_batches.text_batch(texts, texts_b, predictor.tokenizer,
                                         predictor.max_seq_length, predictor.labels)

    def litert_predict(self, predictor, texts, texts_b):
        """LiteRTPredictor.predict()'s results (its docstring)."""
        batch = self.litert_batch(predictor, texts, texts_b)
        if not len(batch.features["input_ids"]):
            return self._no_results(predictor)
        outputs = predictor.run(batch.features)
        found = self.litert_decode(outputs, batch, predictor.labels,
                                   predictor.info["do_lower_case"], predictor.crf)
        return self._results(predictor, found, outputs, batch)

    def _no_results(self, predictor):
        del predictor
        return []

    def _results(self, predictor, found, outputs, batch):
        del predictor, outputs, batch
        return found

    def litert_answers(self, predictor, questions, contexts):
        """LiteRTPredictor.answers(): a SQuAD head's answers with their scores."""
        del questions, contexts
        raise ValueError("answers() is for a squad model; this export is a %s: use "
                         "predict()" % predictor.model_type)


def _share_equal(pairs):
    """The share of equal (a, b) pairs (1.0 when there are none)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    pairs = list(pairs)
    return float(np.mean([a == b for a, b in pairs])) if pairs else 1.0


# -- The heads: one class per model type, each answering what the doors ask -------------

class Encoder(ModelType):
    """The encoder (any folder's BERT): per-position outputs and, with --pooling, sentence
    vectors (its embed signature; LiteRT's answers, compared by cosine)."""
    serving_functions = ModelType.serving_functions + (
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


class Classifier(ModelType):
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


class Squad(ModelType):
    """run_squad's heads (v1.1, v2.0): question / context windows, run_squad's n-best."""
    serving_functions = (
        ("serving_default", "serve_squad", (("question", 1), ("context", 1)), None),
        ("answer", "answer", (("question", 1), ("context", 1)), None))
    # run_squad's prediction settings (exports before they were recorded: its defaults).
    litert_info_fields = (("max_query_length", "count"), ("doc_stride", "count"),
                          ("n_best_size", "count"), ("max_answer_length", "count"),
                          ("version_2_with_negative", "bool"),
                          ("null_score_diff_threshold", "number"))

    def serving_outputs(self, module, model, features):
        # Its logits at every position of the request are outputs: no skip_padding.
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        out = model(features, training=False)
        return {"start_logits": tf.cast(out["start_logits"], tf.float32),
                "end_logits": tf.cast(out["end_logits"], tf.float32)}

    def serving_state(self, tokenizer, max_seq_length, squad_rules, top_k):
        squad_rules.check(max_seq_length)
        return {"squad_tokens": tokenizer.token_table()}  # id -> piece

    def export_info(self, module):
        return module.squad_rules.to_dict()

    def answer_rules(self, settings):
        from bert_tf2.export import serving_squad  # pylint: disable=import-outside-toplevel
        return serving_squad.rules_of(settings.part(*serving_squad.SETTINGS))

    def unused_flags(self, settings, multilabel):
        if settings.version_2_with_negative:
            return []
        return [("null_score_diff_threshold", "without --version_2_with_negative")]

    def litert_examples(self, path, tokenizer, max_seq_length, limit, labels, columns,
                        doc_stride, squad_rules):
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.export import serving_squad
        return litert_batches.squad_file_batch(path, tokenizer, max_seq_length, limit,
                                               squad_rules or serving_squad.SquadRules())

    def litert_file_settings(self, settings):
        return {"squad_rules": self.answer_rules(settings)}

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.squad_predictions(outputs, batch, do_lower_case)

    def litert_count(self, batch):
        return len(batch.extra[0])

    def _agreement(self, want, found):
        return _share_equal((want.predictions[k], found.predictions[k])
                            for k in want.predictions)

    def _metric(self, found, batch):
        from bert_tf2.tasks import squad_results  # pylint: disable=import-outside-toplevel
        # SQuAD 2.0 (the export's rules): the official 2.0 script's F1, unanswerable
        # questions included.
        version_2 = bool(batch.extra[2].version_2_with_negative)
        return "f1", float(squad_results.evaluate_predictions(batch.gold, found,
                                                              version_2)["f1"])

    def litert_batch(self, predictor, texts, texts_b):
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.tasks import squad_data
        questions, contexts = squad_data.predict_pairs(texts, texts_b)
        return litert_batches.squad_batch(
            litert_batches.squad_examples(questions, contexts), predictor.tokenizer,
            predictor.max_seq_length, predictor.squad_rules)

    def squad_predictions(self, predictor, batch):
        """squad_results.SquadPredictions of a squad Batch (questions whose context has no
        piece have no window, and answer as run_squad's do)."""
        outputs = predictor.run(batch.features) if len(batch.features["input_ids"]) else {}
        return self.litert_decode(outputs, batch, predictor.labels,
                                  predictor.info["do_lower_case"], None)

    def litert_predict(self, predictor, texts, texts_b):
        batch = self.litert_batch(predictor, texts, texts_b)
        found = self.squad_predictions(predictor, batch)
        return [found.predictions[e.qas_id] for e in batch.extra[0]]

    def litert_answers(self, predictor, questions, contexts):
        from bert_tf2.tasks import squad_results  # pylint: disable=import-outside-toplevel
        batch = self.litert_batch(predictor, questions, contexts)
        found = self.squad_predictions(predictor, batch)
        return [squad_results.answer_of(found, e.qas_id) for e in batch.extra[0]]


class Tagger(ModelType):
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
        return _share_equal((a, b) for x, y in zip(want, found) for a, b in zip(x, y))

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


class MultipleChoice(ModelType):
    """run_multiple_choice's head: a context and its endings, a probability per ending."""
    serving_functions = (
        ("serving_default", "choose", (("context", 1), ("endings", 2)), None),)

    def serving_outputs(self, module, model, features):
        # [B x C, S] rows: one batch through BERT, a score per row.
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        pooled = model.bert(features["input_ids"], features["input_mask"],
                            features["segment_ids"], training=False)["pooled_output"]
        return {"logits": tf.cast(model.scorer(pooled), tf.float32)[:, 0]}


class Pretraining(ModelType):
    """run_pretraining's heads (masked LM and next sentence): converted, served as the
    encoder; its masked-LM part is MaskedLM's."""


class MaskedLM(ModelType):
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
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.masked_file_batch(path, tokenizer, max_seq_length, limit)

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


# -- The registry: one instance of each head (head_types reads them) -------------------

def _build_encoder(bert_config, **unused):
    from bert import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    model = modeling.BertModel(bert_config)
    dummy = heads.dummy_features()
    model(dummy["input_ids"], dummy["input_mask"], dummy["segment_ids"])
    return model


def _head_builder(class_name, *keys):
    """A builder of heads.`class_name` (bert_tf2/heads.py), given the keyword arguments `keys`
    (num_labels first, positionally, when it is one of them)."""
    def build(bert_config, **kwargs):
        from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
        given = {key: kwargs.get(key) for key in keys if key != "num_labels"}
        args = (kwargs.get("num_labels"),) if "num_labels" in keys else ()
        model = getattr(heads, class_name)(bert_config, *args, **given)
        model(heads.dummy_features(), training=False)
        return model
    build.__name__ = "build_" + class_name
    return build


def _axes(**axes):
    return types.MappingProxyType(axes)


# The masked-LM head's weights, TF1 name -> HF name: the pre-training head's first part and
# fill-mask's whole head.
_MASKED_LM_KEYS = (
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight"),
    ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight"),
    ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias"),
    ("cls/predictions/output_bias", "cls.predictions.bias"),
)

# keras-hub's BertMaskedLM: where the masked-LM head's weights sit, and how it differs.
_KERAS_HUB_MASKED_LM = (
    ("cls/predictions/transform/dense/kernel", "masked_lm_head._intermediate_dense", "kernel"),
    ("cls/predictions/transform/dense/bias", "masked_lm_head._intermediate_dense", "bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "masked_lm_head._intermediate_layer_norm",
     "gamma"),
    ("cls/predictions/transform/LayerNorm/beta", "masked_lm_head._intermediate_layer_norm",
     "beta"),
    ("cls/predictions/output_bias", "masked_lm_head", "_bias"),
)
_KERAS_HUB_MASKED_LM_NOTE = (
    "keras-hub's BertMaskedLM computes its masked-LM transform with the exact erf GELU and "
    "LayerNorm epsilon 1e-5 (ours: tanh GELU, 1e-12) and has no next-sentence head: its "
    "logits differ slightly from ours and cls/seq_relationship is not written")

# In export_saved_model --model_type's order (its flag and messages list them so).
ENTRIES = (
    Encoder(
        "encoder", None, ("encoder", "sentence embedding"), build=_build_encoder,
        tf1_rank=3, litert_rank=1,
        checks_head=False, sentence_embedding=True, litert_outputs=("sentence_embedding",),
        litert_compared=("sentence_embedding",),
        sequence_axes=_axes(sequence_output=1, encoder_layers=2, input_ids=1, input_mask=1,
                            segment_ids=1),
        flags=("layers", "pooling", "normalize"), hf_class="BertModel", hf_rank=6,
        hf_prefix="", held_rank=5, keras_hub_class="BertBackbone"),
    Classifier(
        "classifier", "run_classifier",
        ("classifier", "multi-label classifier", "regression", "long-text classifier"),
        build=_head_builder("BertClassifier", "num_labels"), tf1_rank=1,
        litert_rank=0,
        litert_refused=("multi-label classifier", "long-text classifier"),
        labels=True, class_labels=True,
        litert_outputs=("probabilities", "logits", "predictions"),
        litert_compared=("predictions", "probabilities"),
        flags=("task_name", "xnli_language", "labels_file", "threshold", "long_text",
               "head_tokens", "doc_stride", "window_pooling"),
        hf_class="BertForSequenceClassification",
        hf_head_keys=(("output_weights", "classifier.weight"),
                      ("output_bias", "classifier.bias")), hf_rank=2, held_rank=1,
        held_marks=("output_weights", "output_bias"), label_variable="output_weights",
        keras_hub_class="BertTextClassifier",
        keras_hub_weights=(("output_weights", "output_dense", "kernel"),
                           ("output_bias", "output_dense", "bias"))),
    Squad(
        "squad", "run_squad", ("squad v1.1", "squad v2.0"),
        build=_head_builder("BertSquad"), tf1_rank=2,
        litert_rank=3, signature="squad",
        sequence_axes=_axes(start_logits=1, end_logits=1), trims_by_default=False,
        litert_outputs=("start_logits", "end_logits"),
        litert_compared=("start_logits", "end_logits"),
        flags=("max_query_length", "max_answer_length", "n_best_size", "doc_stride",
               "version_2_with_negative", "null_score_diff_threshold"),
        hf_class="BertForQuestionAnswering", hf_pooler=False,
        hf_head_keys=(("cls/squad/output_weights", "qa_outputs.weight"),
                      ("cls/squad/output_bias", "qa_outputs.bias")), hf_rank=4, held_rank=2,
        held_marks=("cls/squad/output_weights", "cls/squad/output_bias")),
    Tagger(
        "tagger", "run_ner", ("tagger softmax", "tagger crf", "tagger bilstm"),
        build=_head_builder("BertTagger", "num_labels", "feature_layers", "lstm_units",
                            "crf", "crf_penalties"),
        litert_rank=2, signature="words", sequence_axes=_axes(logits=1),
        labels=True, litert_outputs=("logits",), litert_compared=("logits",),
        flags=("labels_file", "feature_based", "layers", "lstm_units", "crf",
               "crf_tag_scheme", "doc_stride"),
        hf_class="BertForTokenClassification", hf_pooler=False,
        hf_head_keys=(("tagger/output_weights", "classifier.weight"),
                      ("tagger/output_bias", "classifier.bias")), hf_rank=3, held_rank=0,
        held_marks=("tagger/output_weights",), label_variable="tagger/output_weights"),
    MultipleChoice(
        "multiple_choice", "run_multiple_choice", ("multiple choice",),
        build=_head_builder("BertMultipleChoice"), signature="choices",
        hf_class="BertForMultipleChoice",
        hf_head_keys=(("multiple_choice/output_weights", "classifier.weight"),
                      ("multiple_choice/output_bias", "classifier.bias")), hf_rank=5,
        held_rank=3,
        held_marks=("multiple_choice/output_weights", "multiple_choice/output_bias")),
    Pretraining(
        "pretraining", "run_pretraining", ("pretraining",),
        build=_head_builder("BertPretrainer"), serves=False, tf1_rank=0,
        served_as="encoder", hf_class="BertForPreTraining",
        hf_head_keys=_MASKED_LM_KEYS + (
            ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight"),
            ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")), hf_rank=0,
        held_rank=4,
        held_marks=("cls/predictions/output_bias", "cls/seq_relationship/output_weights"),
        keras_hub_class="BertMaskedLM", keras_hub_weights=_KERAS_HUB_MASKED_LM,
        keras_hub_note=_KERAS_HUB_MASKED_LM_NOTE),
    # Fill-mask: bert_tf2/export/masked_lm.py (its model, inputs, decoding, Predictor and
    # the SavedModel / LiteRT graph).
    MaskedLM(
        "masked_lm", None, ("masked lm",), build=_head_builder("BertMaskedLM"),
        litert_rank=4, signature="fill_mask",
        sequence_axes=_axes(token_ids=1, probabilities=1),
        litert_outputs=("token_ids", "probabilities", "num_masks"),
        litert_compared=("probabilities",), flags=("fill_mask_top_k",),
        part_of=("pretraining",), hf_class="BertForMaskedLM", hf_pooler=False,
        hf_head_keys=_MASKED_LM_KEYS, hf_rank=1),
)
