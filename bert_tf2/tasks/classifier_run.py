"""run_classifier's concerns, resolved once near the top of a run, into one plain object.

resolve(settings) checks and reads, in the order the errors come: the model's
settings (loaders.check_fine_tuning: the BertConfig, casing), --long_text and its
flags, the task (classifier_tasks.processor_of), every data file or table the run needs
(read now, before the output folder is made: a bad table leaves no empty folder), then
makes the output folder, reads the vocabulary, checks the labels against a saved
label_list.txt, and resolves --positive_label and --class_weights. The run's train /
evaluate / predict steps read the ClassifierRun it returns. resolve_folder does the same
for a trained folder's Predictor (no data files, no output folder made).
"""
import dataclasses

from bert_tf2 import fileutil
from bert_tf2 import loaders
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import long_text
from bert_tf2.trainer import class_weights

# The settings a run_classifier run cannot go without.
REQUIRED_FLAGS = ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir")

@dataclasses.dataclass(frozen=True)
class ClassifierRun:
    """A run_classifier run's concerns, resolved once before any work."""
    bert_config: object  # the model: modeling.BertConfig
    tokenizer: object  # tokenization.FullTokenizer of --vocab_file, checked
    processor: object  # the task: its DataProcessor (labels, type, columns)
    task_type: str  # classifier_tasks.task_type: classification, regression or multilabel
    long_texts: object  # long_text.LongText: --long_text and its flags
    positive: int  # --positive_label's index (tasks of two labels)
    class_weights: object = None  # --class_weights (None: the reference's loss)
    source: str = ""  # the data in messages: "--task_name=X data in ..."
    train_examples: object = None  # the examples of each do_* step (None: not asked for)
    eval_examples: object = None
    predict_examples: object = None


def check(settings):
    """The model's, --long_text's and the task's settings checked before any work;
    returns (bert_config, long_texts, processor)."""
    bert_config = loaders.check_fine_tuning(
   settings.part(*loaders.FINE_TUNING_CHECKS + REQUIRED_FLAGS), REQUIRED_FLAGS)
    # The long_text.json a training run left in --output_dir (or beside --init_checkpoint)
    # gives the defaults: evaluation and prediction read the text as training did.
    long_texts = long_text.from_settings(settings.part(*long_text.SETTINGS),
                                         settings.max_seq_length)
    processor = classifier_tasks.processor_of(  # --threshold checked there
        settings.part(*classifier_tasks.SETTINGS))
    # Warned, not refused: one command line may serve every mode or task of a sweep.
    settings.refuse_unused(long_text.unused_flags(long_texts) + (
        [] if settings.task_name.lower() == "xnli" else
        [("xnli_language", "without --task_name=xnli")]), warn_only=True)
    return bert_config, long_texts, processor


def resolve(settings):
    """Checks and reads everything a run needs (module docstring); a ClassifierRun."""
    bert_config, long_texts, processor = check(settings)
    task_settings = settings.part(*classifier_tasks.SETTINGS)
    # Read (and so check) every data file or table the run needs before any work starts,
    # and before the output folder is made (a bad table leaves no empty folder).
    data_dir = settings.data_dir
    classifier_tasks.check_data_dir(task_settings, processor, data_dir)
    kind = classifier_tasks.task_type(processor)
    source = "--task_name=%s data in %s" % (settings.task_name, data_tables.describe(data_dir))
    train_examples = processor.get_train_examples(data_dir) if settings.do_train else None
    eval_examples = processor.get_dev_examples(data_dir) if settings.do_eval else None
    if settings.do_eval and not eval_examples:
        raise ValueError("--do_eval: the dev set of the %s has no examples" % source)
    predict_examples = processor.get_test_examples(data_dir) if settings.do_predict else None
    fileutil.prepare_output_dir(settings.output_dir, lock=settings.do_train)
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    classifier_tasks.check_labels(task_settings, processor)  # against a saved label_list.txt
    positive = classifier_tasks.positive_index(task_settings, processor)  # --positive_label
    weights = class_weights.from_settings(
        settings.class_weights, settings.do_train, processor.get_labels(),
        [e.label for e in train_examples or ()],
        unsupported="a regression task" if processor.is_regression else
        "a multi-label task" if processor.is_multilabel else None)
    return ClassifierRun(bert_config, tokenizer, processor, kind, long_texts, positive, weights,
                         source, train_examples, eval_examples, predict_examples)


def resolve_folder(settings):
    """resolve() for a trained folder's predictions from Python: the settings checked, the
    labels against the folder's, the vocabulary read; a ClassifierRun without data."""
    bert_config, long_texts, processor = check(settings)
    task_settings = settings.part(*classifier_tasks.SETTINGS)
    classifier_tasks.check_labels(task_settings, processor)
    kind = classifier_tasks.task_type(processor)
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    return ClassifierRun(bert_config, tokenizer, processor, kind, long_texts,
                         classifier_tasks.positive_index(task_settings, processor))
