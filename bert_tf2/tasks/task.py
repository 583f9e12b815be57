"""The one shape of a fine-tuning task: what every runner's task object offers.

A runner (run_classifier, run_ner, run_squad, run_multiple_choice) reads its flags,
resolves its data once (classifier_run.resolve, ner_task.resolve, squad_task.resolve,
multiple_choice_task.resolve), and then hands the trainer a task object. The trainer
(trainer/training.py, trainer/prediction.py) knows nothing of tasks: it builds the model
of `model`, trains on the records `write_features` wrote (read with `spec`) through
`loss_fn`, and runs `predict_fn` over evaluation or test records. The runner then scores
what came out with `metrics`.

Where each task lives:
- classifier_task.ClassifierTask (and MultiLabelTask): run_classifier, incl. the
  multi-label tasks and --long_text;
- ner_task.NerTask: run_ner;
- squad_task.SquadTask: run_squad;
- multiple_choice_task.MultipleChoiceTask: run_multiple_choice.
tests/test_task_protocol.py checks that each of them is a FineTuningTask.

Optional hooks, kept by the tasks that need them (not every task has them):
- `predictions(runner, examples, stage, batch_size, written=None)`: the model run over
  the examples' records (output_dir/stage.tf_record), in the task's own form, the
  `predictions` metrics() reads (classifier: the evaluated columns, one real row per
  example; NER: tags per sentence, loss and weight; multiple choice: probability columns;
  SQuAD: the SquadPredictions of the n-best);
- run_classifier's `evaluated_columns` / `output_rows` / `prediction_record` (the rows
  of test_results.tsv and test_predictions.jsonl) and `ordered_dataset`;
- `features(examples)` (NER): the windows made before they are written, so that the
  training steps are counted first;
- the prediction-pass hooks trainer/runner_body.py's evaluate / dev_evaluation / predict
  call (every fine-tuning runner: run_classifier, run_ner, run_squad, run_multiple_choice,
  run_ranker): `predictions` above, `write(examples, stage)` -> the `written` handle of
  output_dir/stage.tf_record, `write_result_files(output_dir, examples, predictions)` ->
  {Result.outputs name: path} of the files --do_predict writes (test_results.tsv,
  test_predictions.*; SQuAD: predictions.json, nbest_predictions.json, null_odds.json),
  and, when the evaluation writes more than eval_results.txt, `write_eval_files` of the
  same form (NER: eval_predictions.txt). SQuAD's `examples` are squad_task.SquadQuestions
  (the SquadExamples and the articles of their gold answers).
"""
import typing


@typing.runtime_checkable
class FineTuningTask(typing.Protocol):
    """What the train / evaluate / predict steps of every fine-tuning runner call.

    spec: {feature name: tf.io.FixedLenFeature} of the training records write_features
      writes; training.fine_tune (or the runner's own input_fn) parses them with it.
    """

    spec: dict

    def model(self, bert_config):
        """A new tf_keras model of this task (the Runner's model_fn calls it once, under
        the distribution strategy): `bert_config` is the modeling.BertConfig."""

    def write_features(self, examples, path):
        """Writes the TFRecord file of `examples` (the task's own: InputExamples, a
        ConllFile, SquadExamples, multiple-choice Examples) to `path`; returns how
        many records it holds (windows of long texts count one each)."""

    def loss_fn(self, model, features, is_training):
        """(scalar loss of this replica's batch, {name: scalar to log}) -- the trainer's
        loss_fn (training.Runner.train divides it by the replica count). `features`:
        one batch of the records, parsed with `spec`."""

    def predict_fn(self, model, features):
        """{name: [B, ...] tensor} of one batch, with features["is_real_example"] passed
        through (the padding rows of a last partial batch are 0 there): the trainer's
        predict_fn (training.Runner.predict gives them back as numpy arrays, in order)."""

    def metrics(self, examples, predictions):
        """eval_results.txt's values but global_step ({name: numpy float}) of
        `predictions` (what the task's prediction pass made of `examples`; the gold
        labels or answers come from `examples` where the predictions do not hold
        them)."""

    def metric_names(self, examples=None):
        """The sorted names metrics() reports for `examples` (the evaluation data), known
        before the model is built: --best_metric is checked against them."""
