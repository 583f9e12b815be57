"""run_ner's task, resolved once: settings checks, CoNLL data, label list, tag scheme,
the tagger's features, model, losses and tag predictions.

resolve(settings, saved_scheme) checks and reads everything a run needs, in the order
the errors come, into a NerRun (frozen): the settings (--crf_tag_scheme resolved), the
BertConfig, the ConllFiles of the do_* steps, the label list, the NerTask and the
evaluation's metric names; run_ner's train / evaluate / predict steps read its fields.
resolve_folder does the same for a trained folder's Predictor (no data files).
"""
import dataclasses
import os

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2 import loaders
from bert_tf2 import input_pipeline
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import label_order
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import ner_metrics
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import class_weights
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record

_SPLITS = {"train": ("train_file", "train.txt"), "eval": ("eval_file", "dev.txt"),
           "predict": ("predict_file", "test.txt")}

REQUIRED_FLAGS = ("vocab_file", "bert_config_file", "output_dir")

# The settings NerTask reads: how sentences become windows, the model, where files go.
TASK_SETTINGS = ("max_seq_length", "doc_stride", "document_context", "use_tpu",
                  "feature_based", "layers", "lstm_units", "crf", "crf_tag_scheme",
                  "output_dir")

# The variable --crf_learning_rate sets the rate of (a regex of its name), and that
# rate's default, in multiples of --learning_rate.
_CRF_VARIABLES = "(^|/)crf/transitions"
CRF_RATE_FACTOR = 100.0


def token_loss(logits, label_ids, label_weights, weights=None):
    """Mean cross-entropy over the labelled pieces of the GLOBAL batch, for one replica.

    Args:
      logits: [batch, seq_length, num_labels] float32, this replica's.
      label_ids: [batch, seq_length] int.
      label_weights: [batch, seq_length], 1.0 on the first piece of a word.
      weights: --class_weights ([num_labels]) or None: each labelled piece's loss
        times its tag's weight, still divided by the number of labelled pieces
        (pieces of weight 0, padding and a word's later pieces, stay out).

    Returns:
      A scalar: this replica's weighted sum over the weights of all replicas, times
      the number of replicas; training.Runner divides each replica's loss by that
      number and sums the gradients, so any number of replicas trains on the mean
      over all labelled pieces of the global batch, as one device does.
    """
    per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label_ids,
                                                               logits=logits)
    label_weights = tf.cast(label_weights, per_token.dtype)
    denominator = training.global_sum(tf.reduce_sum(label_weights)) + 1e-5
    if weights is not None:
        label_weights = label_weights * class_weights.of_labels(weights, label_ids)
    return tf.reduce_sum(per_token * label_weights) / denominator * training.num_replicas()


def crf_loss(logits, transitions, label_ids, label_weights, start_penalty=None,
             starts=None):
    """--crf: mean negative log-likelihood per window of the GLOBAL batch, for one replica.

    Args:
      logits: [batch, seq_length, num_labels] float32; transitions [num_labels, num_labels].
      label_ids, label_weights: [batch, seq_length]; the chain of a window is its pieces
        of weight > 0 (each word's first piece), in order.
      start_penalty: [num_labels] (--crf_tag_scheme; None: none), added to the first
        word of the windows whose `starts` [batch] is > 0 (their sentence's first window).

    Returns:
      A scalar scaled as token_loss's: the mean over the windows with words of all
      replicas, once training.Runner sums the replicas' gradients.
    """
    nll, has_words = heads.crf_negative_log_likelihood(logits, transitions, label_ids,
                                                       label_weights, start_penalty, starts)
    denominator = tf.maximum(training.global_sum(tf.reduce_sum(has_words)), 1.0)
    return tf.reduce_sum(nll) / denominator * training.num_replicas()


def tag_scheme(settings, train, labels, saved):
    """--crf_tag_scheme resolved to iob2 or none (logged; none without --crf).

    Args:
      settings: the run's settings; train: the training ConllFile (None: no training);
      labels: the label list; saved: the model folder's crf_tag_scheme (None: none).
    """
    if not settings.crf:
        return "none"
    scheme, why = settings.crf_tag_scheme, "given"
    if not settings.given("crf_tag_scheme") and saved is not None and scheme == saved:
        why = "the model folder's"  # filled in from the folder, not given
    if scheme == "auto" and train is None:
        scheme, why = saved or "none", "the model folder's" if saved else (
            "the model folder records no tag scheme")
    elif scheme == "auto":
        scheme, why = ner_data.auto_tag_scheme(train, labels)
    if scheme == "iob2" and train is not None and ner_data.iob2_break(train):
        _, changed, left = ner_data.to_iob2(train, labels)
        if left:
            raise ValueError("--crf_tag_scheme=iob2: %s breaks IOB2 and has no B- label to "
                             "make it (an IOB1 file? use --crf_tag_scheme=auto or none)"
                             % left)
        logging.warning("--crf_tag_scheme=%s: %d tags of %s break IOB2 (first: %s): "
                        "trained as B-X, the same entities as conlleval reads them",
                        settings.crf_tag_scheme, changed, train.path,
                        ner_data.iob2_break(train))
    logging.info("--crf tag scheme: %s (%s)", scheme, why)
    return scheme


def crf_rates(settings):
    """The optimizer's learning_rate_multipliers of --crf's transitions (None: none)."""
    if not (settings.crf and settings.do_train) or settings.learning_rate <= 0:
        return None
    rate = settings.crf_learning_rate
    if rate is None:
        rate = CRF_RATE_FACTOR * settings.learning_rate
    return {_CRF_VARIABLES: rate / settings.learning_rate}


def warn_without_transitions(path):
    """One warning when --crf restores a tagger checkpoint without CRF transitions."""
    if path is None:
        return
    names = checkpoints.CheckpointContents(path).keys
    if "tagger/output_weights" in names and "crf/transitions" not in names:
        logging.warning("--crf: checkpoint %s is a tagger's without crf/transitions (a run "
                        "without --crf): the transitions start at zero", path)


def check_settings(settings):
    """Checks the settings before any work; returns the BertConfig."""
    bert_config = loaders.check_fine_tuning(
   settings.part(*loaders.FINE_TUNING_CHECKS + REQUIRED_FLAGS), REQUIRED_FLAGS)
    if settings.max_seq_length < 3:
        raise ValueError("--max_seq_length=%d is too short: [CLS] word [SEP] needs at least 3"
                         % settings.max_seq_length)
    ner_data.doc_stride_of(settings.doc_stride)
    settings.refuse_unused([] if settings.feature_based else [
        (name, "without --feature_based (the fine-tuned tagger reads no encoder layers "
               "into an LSTM)") for name in ("layers", "lstm_units")])
    settings.refuse_unused([("class_weights", "with --crf (the CRF's likelihood is of whole "
                                              "tag sequences, not of tokens)")]
                           if settings.crf else [
                               (name, "without --crf") for name in ("crf_tag_scheme",
                                                                    "crf_learning_rate")])
    settings.refuse_unused([("crf_learning_rate", "without --do_train")], warn_only=True)
    if settings.crf_tag_scheme not in heads.TAG_SCHEMES:
        raise ValueError("--crf_tag_scheme must be one of %s, got %r"
                         % (", ".join(heads.TAG_SCHEMES), settings.crf_tag_scheme))
    if settings.crf_learning_rate is not None and not settings.crf_learning_rate > 0:
        raise ValueError("--crf_learning_rate=%g must be > 0" % settings.crf_learning_rate)
    if settings.crf and settings.do_train and settings.optimizer_type.lower() == "lamb" and (
            not settings.fused_optimizer):
        raise ValueError("--crf with --optimizer_type=lamb --nofused_optimizer: "
                         "tf-models' LAMB has no rate of its own for crf/transitions "
                         "(--crf_learning_rate); use the fused LAMB")
    settings.refuse_unused([(flag, "without --do_%s" % split)
                            for split, (flag, _) in sorted(_SPLITS.items())
                            if not getattr(settings, "do_" + split)], warn_only=True)
    if settings.feature_based:
        if settings.lstm_units < 1:
            raise ValueError("--lstm_units=%d must be >= 1" % settings.lstm_units)
        layers = _feature_layers(settings.layers)
        for index in layers:
            if not -bert_config.num_hidden_layers <= index < bert_config.num_hidden_layers:
                raise ValueError("--layers: %d is not a layer of a %d-layer model"
                                 % (index, bert_config.num_hidden_layers))
    return bert_config


def _feature_layers(layers):
    """--layers (a string) as a list of ints."""
    try:
        return [int(x) for x in layers.split(",")]
    except ValueError:
        raise ValueError("--layers must be comma-separated integers, got %r"
                         % layers) from None


def _path(settings, split):
    """The file of a split: its own flag, else the conventional name in --data_dir."""
    flag, name = _SPLITS[split]
    if getattr(settings, flag):
        return getattr(settings, flag)
    if not settings.data_dir:
        raise ValueError("--%s or --data_dir is required for --do_%s" % (flag, split))
    return os.path.join(settings.data_dir, name)


# The data_dir table (data_tables' split name) of each step.
_TABLES = {"train": "train", "eval": "dev", "predict": "test"}


def _conll(settings, split, require_tags=True):
    """The ConllFile of a step: its file flag, else data_dir's table (a dict from Python:
    {"train": sentences, ...}, ner_data.conll_of_sentences), else data_dir's file."""
    flag = _SPLITS[split][0]
    if not getattr(settings, flag) and data_tables.is_tables(settings.data_dir):
        key = _TABLES[split]
        data_tables.check_splits(settings.data_dir, {key: "--do_%s" % split})
        return ner_data.conll_of_sentences(settings.data_dir[key], data_tables.name(key),
                                           require_tags)
    return ner_data.read_conll(_path(settings, split), require_tags=require_tags)


def read_data(settings):
    """Reads the files of the do_* steps and the label list; checks the tags.

    Returns:
      (train, evaluation, prediction, labels): ConllFiles (None where the step is
      not asked for; the prediction file's tags, if it has any, are not used)
      and the label list.
    """
    if settings.data_dir is not None:
        data_tables.check_splits(settings.data_dir, {})
    train = _conll(settings, "train") if settings.do_train else None
    labels = labels_of(settings, train)
    evaluation = None
    if settings.do_eval:
        evaluation = _conll(settings, "eval")
        ner_data.check_tags(evaluation, labels)
    prediction = None
    if settings.do_predict:
        prediction = ner_data.drop_tags(_conll(settings, "predict", require_tags=False))
    return train, evaluation, prediction, labels


def labels_of(settings, train):
    """The label list, which belongs to the output layer: the label_list.txt of the head the
    run starts from (training_record.head_file: the restored output_dir's, else the one
    beside --init_checkpoint), else --labels_file, else the training file's (O first, the
    rest sorted). A --labels_file other than the head's list, or training tags it lacks:
    ValueError naming both."""
    path = training_record.head_file(settings, ner_data.LABELS_FILE_NAME)
    if settings.labels_file:
        labels = label_order.read_labels_file(settings.labels_file, path, ner_data.read_labels,
                                              training_record.way_out(settings, path))
        if train is not None:
            ner_data.check_tags(train, labels)
        return labels
    saved = ner_data.read_labels(path) if path else None
    if saved is not None:
        wanted = ner_data.labels_from(train) if train is not None else []
        if not set(wanted) <= set(saved):
            raise ValueError("%s holds the %s of other tags (%s) than %s's (%s)%s" % (
                _head_folder(settings, path), ner_data.LABELS_FILE_NAME, " ".join(saved),
                train.path, " ".join(wanted), training_record.way_out(settings, path)))
        return saved
    if train is not None:
        return ner_data.labels_from(train)
    raise ValueError("no label list: pass --labels_file, or --do_train, or an "
                     "--output_dir or --init_checkpoint holding %s from training"
                     % ner_data.LABELS_FILE_NAME)


def _from_init(settings, path):
    return path == checkpoints.file_beside(settings.init_checkpoint, ner_data.LABELS_FILE_NAME)


def _head_folder(settings, path):
    if _from_init(settings, path):
        return "--init_checkpoint=%s" % settings.init_checkpoint
    return "--output_dir=%s" % settings.output_dir


class NerTask(object):
    """What the train / evaluate / predict steps share: labels, features, model, loss
    (a FineTuningTask, task.py)."""

    def __init__(self, settings, labels, tokenizer, weights=None):
        self.settings = settings  # a part of the run's settings: TASK_SETTINGS
        self.labels = labels
        self.tokenizer = tokenizer
        self.spec = ner_data.record_spec(settings.max_seq_length)
        self.class_weights = weights  # --class_weights (None: unweighted)

    def features(self, conll_file):
        """The windowed Features of a read file (--crf_tag_scheme=iob2: its labels with
        the tags that break IOB2 made B-X, ner_data.to_iob2)."""
        settings = self.settings
        if settings.crf and settings.crf_tag_scheme == "iob2":
            conll_file = ner_data.to_iob2(conll_file, self.labels)[0]
        return ner_data.convert_file(conll_file, self.labels, settings.max_seq_length,
                                     settings.doc_stride, self.tokenizer,
                                     settings.document_context)

    def model(self, bert_config):
        """A BertTagger for these labels (fine-tuned, or feature-based)."""
        settings = self.settings
        return heads.BertTagger(
            bert_config, len(self.labels), use_one_hot_embeddings=settings.use_tpu,
            feature_layers=_feature_layers(settings.layers) if settings.feature_based else None,
            lstm_units=settings.lstm_units, crf=settings.crf,
            crf_penalties=heads.crf_constraints(self.labels, settings.crf_tag_scheme)
            if settings.crf else None)

    def loss_fn(self, model, features, is_training):
        """The training loss of one replica's batch (see token_loss, crf_loss)."""
        out = model(features, training=is_training)
        if self.settings.crf:
            return crf_loss(out["logits"], out["transitions"], features["label_ids"],
                            features["label_weights"], out.get("start_penalty"),
                            features.get("starts_sentence")), {}
        return token_loss(out["logits"], features["label_ids"], features["label_weights"],
                          self.class_weights), {}

    def predict_fn(self, model, features):
        """Per position: the predicted label id and its loss against the given label
        (--crf: Viterbi's tags; each window's negative log-likelihood at position 0)."""
        out = model(features, training=False)
        logits = out["logits"]
        if self.settings.crf:
            return self._crf_predictions(logits, out["transitions"], out.get("start_penalty"),
                                         features)
        per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=features["label_ids"], logits=logits)
        return {"predicted": tf.argmax(logits, -1, output_type=tf.int32),
                "loss": per_token * features["label_weights"],
                "weights": features["label_weights"],
                "is_real_example": features["is_real_example"]}

    @staticmethod
    def _crf_predictions(logits, transitions, start_penalty, features):
        """predict_fn's outputs of a --crf tagger: eval_loss is then the mean
        negative log-likelihood per window, as crf_loss trains."""
        weights = features["label_weights"]
        starts = (start_penalty, features.get("starts_sentence"))
        nll, has_words = heads.crf_negative_log_likelihood(
            logits, transitions, features["label_ids"], weights, *starts)
        at_first = tf.one_hot(tf.zeros_like(nll, tf.int32), tf.shape(weights)[1])
        return {"predicted": heads.crf_predictions(logits, transitions, weights, *starts),
                "loss": nll[:, tf.newaxis] * at_first,
                "weights": has_words[:, tf.newaxis] * at_first,
                "is_real_example": features["is_real_example"]}

    def write_features(self, examples, path, features=None):
        """Writes the windows of the ConllFile `examples` (`features`: those features()
        made of it already) to `path`; returns how many."""
        if features is None:
            features = self.features(examples)
        ner_data.write_features(features, path)
        return len(features)

    def write(self, conll_file, name):
        """Windows `conll_file` into output_dir/`name`.tf_record; returns (features, path)."""
        features = self.features(conll_file)
        training.log_stage(name, ["Num sentences = %d, windows = %d"
                                  % (len(conll_file.sentences), len(features))])
        path = os.path.join(self.settings.output_dir, name + ".tf_record")
        self.write_features(conll_file, path, features)
        return features, path

    def predictions(self, runner, conll_file, stage, batch_size, written=None):
        """Tags `conll_file` through `stage`.tf_record (written now, or `written`: the
        (features, path) of write()); returns (tags per sentence, loss sum, weight)."""
        features, path = written or self.write(conll_file, stage)
        dataset_fn = input_pipeline.dataset_fn_for([path], self.spec, batch_size,
                                                   is_training=False,
                                                   trim_padding=runner.trim_padding)
        length = self.settings.max_seq_length
        per_token = {"predicted": length, "loss": length, "weights": length}
        predicted, loss, weight = [], 0.0, 0.0
        for out in runner.predict(dataset_fn, self.predict_fn, sequence_outputs=per_token,
                                  stage=stage, total_steps=-(-len(features) // batch_size)):
            real = np.asarray(out["is_real_example"]) > 0
            predicted.extend(np.asarray(out["predicted"])[real])
            loss += float(np.sum(np.asarray(out["loss"], np.float64)[real]))
            weight += float(np.sum(np.asarray(out["weights"], np.float64)[real]))
        if len(predicted) != len(features):
            raise RuntimeError("predicted %d windows, expected %d"
                               % (len(predicted), len(features)))
        tags = ner_data.sentence_predictions(conll_file, features, predicted, self.labels)
        return tags, loss, weight

    @staticmethod
    def metrics(examples, predictions):
        """eval_results.txt's values (module metrics) of predictions()' (tags, loss sum,
        weight) against the gold tags of the ConllFile `examples`."""
        return metrics([s.tags for s in examples.sentences], *predictions)

    @staticmethod
    def metric_names(examples=None):
        """The names metrics() reports for the ConllFile `examples` (module metric_names;
        [] without one)."""
        return metric_names(examples) if examples is not None else []

    @staticmethod
    def write_eval_files(output_dir, conll_file, predictions):
        """eval_predictions.txt: the evaluation file with predictions()' tags as its last
        column; {"eval_predictions": its path}."""
        path = os.path.join(output_dir, "eval_predictions.txt")
        ner_data.write_predictions(path, conll_file, predictions[0])
        return {"eval_predictions": path}

    @staticmethod
    def write_result_files(output_dir, conll_file, predictions):
        """test_predictions.txt: the file to tag with predictions()' tags as its last
        column; {"test_predictions": its path}."""
        tags = predictions[0]
        path = os.path.join(output_dir, "test_predictions.txt")
        ner_data.write_predictions(path, conll_file, tags)
        logging.info("Wrote the tags of %d sentences to %s", len(tags), path)
        return {"test_predictions": path}


def metrics(gold, tags, loss, weight):
    """conlleval's entity scores, token accuracy and the mean loss, as numpy float32."""
    scores = ner_metrics.score(gold, tags)
    result = {"eval_precision": np.float32(scores["precision"]),
              "eval_recall": np.float32(scores["recall"]),
              "eval_f1": np.float32(scores["f1"]),
              "eval_accuracy": np.float32(scores["accuracy"]),
              "eval_loss": np.float32(loss / weight if weight else 0.0)}
    for kind, (_, _, f1, _) in scores["per_type"].items():
        result["eval_f1_%s" % kind] = np.float32(f1)
    return result


def metric_names(conll_file):
    """The names of the evaluation file's metrics: those of its gold tags scored against
    themselves (every type of the file has its eval_f1_<TYPE>)."""
    gold = [s.tags for s in conll_file.sentences]
    return sorted(metrics(gold, gold, 0.0, 0.0))


@dataclasses.dataclass(frozen=True)
class NerRun:
    """A run_ner run's concerns, resolved once before any work (resolve)."""
    settings: object  # the run's Settings: the folder's defaults, crf_tag_scheme resolved
    bert_config: object
    labels: list
    task: object  # the NerTask
    train: object = None  # the ConllFile of each do_* step (None: not asked for)
    evaluation: object = None
    prediction: object = None
    eval_metric_names: object = None  # eval_results.txt's names (None without do_eval)


def resolve(settings, saved_scheme):
    """Checks and reads what a run needs, in the order its errors come: the settings,
    the data files and the label list; then the output folder is made (locked when
    training), the vocabulary read, --crf_tag_scheme resolved (`saved_scheme`: the model
    folder's), --best_metric checked against the evaluation's metrics, --class_weights
    read. Returns a NerRun."""
    bert_config = check_settings(settings)
    # Every file (or table) the run needs is read, and so checked, before any work starts
    # and before the output folder is made.
    train, evaluation, prediction, labels = read_data(settings)
    fileutil.prepare_output_dir(settings.output_dir, lock=settings.do_train)
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    settings = settings.fill({"crf_tag_scheme": tag_scheme(settings, train, labels,
                                                           saved_scheme)})
    # The names the evaluations will report: a wrong --best_metric stops the run here.
    names = metric_names(evaluation) if evaluation else None
    periodic_eval.check_names(settings.part(*periodic_eval.SETTINGS), names)
    weights = class_weights.from_settings(
        settings.class_weights, settings.do_train, labels,
        [tag for s in train.sentences for tag in s.tags] if train else [])
    return NerRun(settings, bert_config, labels,
                  NerTask(settings.part(*TASK_SETTINGS), labels, tokenizer, weights),
                  train, evaluation, prediction, names)


def resolve_folder(settings, saved_scheme):
    """resolve() for a trained folder's predictions from Python: the label list and tag
    scheme are the folder's; no data file, no output folder made. Returns a NerRun."""
    bert_config = check_settings(settings)
    labels = labels_of(settings, None)
    settings = settings.fill({"crf_tag_scheme": tag_scheme(settings, None, labels,
                                                           saved_scheme)})
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    return NerRun(settings, bert_config, labels,
                  NerTask(settings.part(*TASK_SETTINGS), labels, tokenizer))
