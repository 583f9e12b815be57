"""The one training loop: strategy, precision, train / predict loops, checkpoints.

What TPUEstimator did for the reference scripts, in TF2:
- `get_strategy` builds the tf.distribute strategy from the settings (TPU,
  mirrored GPUs, several workers, one device);
- `Runner` builds a model under the strategy, restores the latest checkpoint of
  output_dir (weights, optimizer slots, step) or else loads --init_checkpoint
  (TF1 or TF2), as restore_plan.plan resolved it; runs `iterations_per_loop`
  steps per tf.function call, saves a checkpoint every `save_checkpoints_steps`,
  logs progress (from inside the call every `log_every_seconds`, and after each
  call) and TensorBoard scalars, and runs prediction loops whose outputs come back in input order
  (prediction.py: PredictionLoop, which Runner inherits).

Gradient semantics are the single-device reference's for any number of
replicas: each replica's loss is divided by the replica count, gradients are
summed across replicas, then clipped to global norm 1.0, then applied.

Contracts with the other modules (bert_tf2/trainer/training.py):
```python
trainer = settings.part(*training.SETTINGS)       # what the trainer reads of a runner's settings
runner = training.make_runner(trainer, model_fn, num_train_steps, num_warmup_steps)
num_train_steps, num_warmup_steps = training.epoch_steps(num_examples, trainer, what)  # accumulation-aware
training.fine_tune(trainer, runner, record_file, spec, loss_fn, ["Num examples = 10"], 10)
                                                  # the fine-tuning runners' training (10: records in
                                                  # the file): header, --train_batch_size, --seed,
                                                  # trimmed batches, --group_by_length;
                                                  # + evaluate, metric_names: periodic_eval
training.log_stage("eval", ["Num examples = 10"])  # "***** Running evaluation *****" + lines
trainer = settings.part(*training.SETTINGS)      # the runner's settings the trainer reads
strategy = training.get_strategy(trainer)        # from --use_tpu/--distribution_strategy/--num_gpus
training.configure_precision(settings.dtype)     # --dtype, before building models
cfg = training.RunConfig.from_settings(trainer, output_dir=..., learning_rate=...,
                                       num_train_steps=..., num_warmup_steps=...,
                                       init_checkpoint=...)
                                                  # RunConfig.autograph: True (default) lets AutoGraph
                                                  # rewrite the step's Python; the faces' runners
                                                  # (make_runner, run_pretraining) set False: their
                                                  # models need no rewrite, ~1.7 s less tracing a run
runner = training.Runner(strategy, model_fn, cfg) # builds model_fn() under the strategy scope, restores the
                                                  # latest checkpoint in output_dir, else init_checkpoint
                                                  # (without an optimizer: a whole init_checkpoint first)
runner.train(dataset_fn, loss_fn, evaluation=None) # (Ctrl-C: training.Interrupted, one line
                                                  # naming the step and the checkpoint a rerun resumes from)
                                                  # dataset_fn(input_context) -> tf.data of per-replica
                                                  # batches; loss_fn(model, features, is_training) ->
                                                  # (called positionally; scalar loss = mean over this replica's batch, dict of
                                                  # scalar metrics to log); evaluation: a
                                                  # periodic_eval.PeriodicEval or None
for out in runner.predict(dataset_fn, predict_fn,   # predict_fn(model, features) -> dict of [B,...] tensors
                          sequence_outputs=None,   # {name: max_seq_length} of per-token outputs (trimmed
                          stage="predict",         # the progress display's name: "eval" or "predict"
                          total_steps=None):       # its batches when known (None: a count, no ETA)
    ...                                           # batches padded back); out: numpy arrays of one GLOBAL
                                                  # batch, in input order (bucketed batches regrouped)
runner.trim_padding                               # --trim_padding, False under a TPUStrategy
runner.skip_padding                               # trim_padding, no XLA, and a model that reads no padding
                                                  # output (heads.reads_padding false): its encoder runs on
                                                  # the real tokens only (modeling.set_skip_padding)
runner.trims_keys                                 # no XLA, no TPU: at inference the attention stops at each
                                                  # batch's last real key (modeling.set_key_trimming)
runner.global_step                                # int: optimizer steps, or the restored checkpoint's step
step = training.run_function(fn, **tf_function_options)  # tf.function of a function each run makes anew
                                                  # (its traces counted for this object alone: no
                                                  # retracing warning over repeated runs)
```
Progress: a report after every train-loop call, and from inside the call (tf.timestamp after
each step, a py_function when --log_every_seconds have passed, or progress.REDRAW_SECONDS
when the display is drawn in place; not on TPUs): the steps and their numbers do not change.
A report updates the stage's display (trainer/progress.py: `progress.Stage(name, total,
mode, every)`, `update(step, examples, loss, lr)`, `close()`; RunConfig.progress =
--progress) and logs the line `step N/M, loss ...` at most every --log_every_seconds when
`logs.details_shown()`. Logs (bert_tf2/logs.py, at the bottom floor): the reference's detail
lines (the "*** Example ***" dumps of every data module, the training progress line) are
logged only when `logs.details_shown()`: INFO by the user's choice (--verbosity given, or
logging.set_verbosity(INFO) from Python), not the INFO absl's app.run sets by default
(run_cli tells it with `logs.use_command_line_default(FLAGS["verbosity"].present)`). A new
per-example or per-step log line goes behind it too. A single CPU device (OneDeviceStrategy)
reads its dataset as it is, not through tf.distribute's multi-device iterator; every other
strategy through it. The optimizer (optimization.create_optimizer(...,
fused=--fused_optimizer, clip_norm=1.0)) clips to global norm 1.0 inside apply_gradients;
optimization.create_slots(optimizer, variables) builds its slots before a checkpoint
restore. Evaluation = predict + numpy metrics in the runner (exact, order-preserving,
padding rows carry is_real_example = 0 via make_dataset(pad_final_batch=True)).
"""
import contextlib
import dataclasses
import os
import time
import weakref

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf2.base import dropout_masks
from bert_tf2.base import path_match
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import first_call
# The strategy and precision of a run (distribution.py), under the names runners call.
from bert_tf2.trainer.distribution import (  # noqa: F401
    configure_precision, get_strategy, global_sum, is_chief, num_replicas, set_seed)
from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import prediction
# The tf.function wrappers of both loops (prediction.py), under the names callers use.
from bert_tf2.trainer.prediction import run_function, step_function  # noqa: F401
from bert_tf2.trainer import progress
from bert_tf2.trainer import restore_plan
from bert_tf2 import logs
from bert_tf2.trainer import summaries
from bert_tf2.trainer import termination as termination_watch
from bert_tf2.trainer import training_record
from bert_tf2.trainer import written_files
from bert import modeling
from bert import optimization
from bert_tf2 import startup  # noqa: F401  the process settings (CPU allocator) hold for every loop

CHECKPOINT_NAME = checkpoints.CHECKPOINT_NAME

# Training loops compiled with --enable_xla in this process ({"made": count}; the
# warning of _warn_compiled_steps_kept comes at the second).
XLA_TRAINING_LOOPS = {"made": 0}


def _warn_compiled_steps_kept():
    """Warns once, at the second --enable_xla training loop of a process: TensorFlow keeps
    every run's compiled step (its XLA cache has no eviction; a 2-layer H 32 model: 49 MiB
    a run), which a notebook or a search in one process pays run after run."""
    XLA_TRAINING_LOOPS["made"] += 1
    if XLA_TRAINING_LOOPS["made"] == 2:
        logging.warning(
            "--enable_xla: a second training run in this process; TensorFlow keeps each "
            "run's compiled step until the process ends (49 MiB a run for a 2-layer H 32 "
            "model, more for larger ones): for many runs, leave enable_xla off or give "
            "each run its own process")


# ---------------------------------------------------------------------------
# Configuration of a run
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class RunConfig:
    """What the loop needs to know; `from_settings` fills it from a runner's settings."""
    output_dir: str
    learning_rate: float = 5e-5
    num_train_steps: int = 0
    num_warmup_steps: int = 0
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    log_every_seconds: float = 30.0
    # The progress display (trainer/progress.py): auto, bar, lines or none.
    progress: str = "auto"
    init_checkpoint: str = None
    optimizer_type: str = "adamw"
    fused_optimizer: bool = True
    num_accumulation_steps: int = 1
    enable_xla: bool = False
    dtype: str = "fp32"
    # TF1 RunConfig's: the most recent checkpoints kept; 0 or None: every one.
    keep_checkpoint_max: int = 5
    # periodic_eval's --keep_best_only: training's checkpoints (written_files) removed once
    # training has ended, when best/ holds one.
    keep_best_only: bool = False
    deterministic_data: bool = False
    seed: int = None
    gradient_checkpointing: bool = False
    # Batches cut to their longest example (input_pipeline.trim_batch); see Runner.trim_padding.
    trim_padding: bool = False
    # {regex: factor}: variables of a learning rate of their own (run_ner --crf_learning_rate).
    learning_rate_multipliers: dict = None
    # What defines the model being trained (training_record.of), compared with the record
    # a checkpoint in output_dir was trained with; None: no comparison (a bare Runner).
    record: dict = None
    # --existing_checkpoint: continue / refuse / restart (None: refuse, a Python caller's).
    existing_checkpoint: str = None
    # False: the step's Python is traced as written, without AutoGraph's rewrite of `if` and
    # `for` over tensors (step_function). The faces' models need none; skipping it saves
    # about 1.7 s of tracing a run. True (a Python caller's default) converts as tf.function does.
    autograph: bool = True

    @classmethod
    def from_settings(cls, trainer, **values):
        """A RunConfig from a runner's settings (the fields of the same names), `values`
        overriding them."""
        names = {f.name for f in dataclasses.fields(cls)}
        for name in names:
            if name not in values and name in trainer and getattr(trainer, name) is not None:
                values[name] = getattr(trainer, name)
        return cls(**values)

    def validate(self):
        """Raises ValueError for settings the loop cannot run with."""
        if not self.output_dir:
            raise ValueError("--output_dir is required")
        for name in ("save_checkpoints_steps", "iterations_per_loop", "num_accumulation_steps"):
            if getattr(self, name) < 1:
                raise ValueError("--%s must be >= 1" % name)
        keep = self.keep_checkpoint_max
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise ValueError("--keep_checkpoint_max=%s must be an integer >= 0 (0: keep every "
                             "checkpoint)" % (keep,))
        if self.deterministic_data and self.seed is None:
            raise ValueError("--deterministic_data needs --seed (the shuffling must be fixed)")
        progress.check_mode(self.progress)
        if not isinstance(self.autograph, bool):
            raise ValueError("RunConfig.autograph must be True or False, got %r"
                             % (self.autograph,))


# The settings of a runner the trainer reads (a part of them: settings_lib.Settings.part):
# the RunConfig's, the strategy's and the fine-tuning loop's, evaluation included.
SETTINGS = tuple(f.name for f in dataclasses.fields(RunConfig)) + (
    "use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "distribution_strategy",
    "num_gpus", "train_batch_size", "num_train_epochs", "warmup_proportion",
    "group_by_length") + periodic_eval.SETTINGS


def make_runner(trainer, model_fn, num_train_steps=0, num_warmup_steps=0,
                learning_rate_multipliers=None, record=None):
    """The Runner of a fine-tuning run; `trainer`: the part of its settings in SETTINGS.

    Seeds (--seed), builds the strategy and precision policy, fills the RunConfig
    from the settings (--output_dir, --learning_rate, --init_checkpoint, the TF2 ones)
    and builds `model_fn()` under the strategy, restoring output_dir's latest
    checkpoint or else --init_checkpoint. An optimizer is made when num_train_steps
    is set; learning_rate_multipliers ({regex: factor}, None: none) give the variables
    whose names match a rate of their own (optimization.keras_optimizer). `record`:
    the run's training_record.of(...) values, checked against output_dir's record.
    """
    set_seed(trainer.seed)
    strategy = get_strategy(trainer)
    configure_precision(getattr(trainer, "dtype", None))
    cfg = RunConfig.from_settings(
        trainer, output_dir=trainer.output_dir, learning_rate=trainer.learning_rate,
        num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
        init_checkpoint=trainer.init_checkpoint,
        learning_rate_multipliers=learning_rate_multipliers, record=record, autograph=False)
    return Runner(strategy, model_fn, cfg, for_training=num_train_steps > 0)


def epoch_steps(num_examples, trainer, what="training examples"):
    """(num_train_steps, num_warmup_steps) for --num_train_epochs over `num_examples`.

    One optimizer step consumes --num_accumulation_steps micro-batches of
    --train_batch_size examples, so an epoch is examples / (batch x accumulation)
    steps; with no accumulation this is the reference's
    int(examples / train_batch_size * num_train_epochs). A plan that trains
    nothing is an error naming the flags (the reference's Estimator refuses
    max_steps <= 0 too), never a run that "succeeds" without training. Data the
    plain path trains on trains with accumulation too: at least one optimizer
    step when the micro-batches make at least one batch (with a warning).
    """
    accumulation = int(getattr(trainer, "num_accumulation_steps", 1) or 1)
    if trainer.train_batch_size < 1:
        raise ValueError("--train_batch_size=%d must be >= 1" % trainer.train_batch_size)
    if accumulation < 1:
        raise ValueError("--num_accumulation_steps=%d must be >= 1" % accumulation)
    if not trainer.num_train_epochs > 0:
        raise ValueError("--num_train_epochs=%s must be > 0" % trainer.num_train_epochs)
    if num_examples < 1:
        raise ValueError("no %s to train on" % what)
    batches = int(num_examples / trainer.train_batch_size * trainer.num_train_epochs)
    if batches < 1:
        raise ValueError(
            "--num_train_epochs=%s over %d %s at --train_batch_size=%d makes 0 optimizer "
            "steps: nothing would be trained"
            % (trainer.num_train_epochs, num_examples, what, trainer.train_batch_size))
    steps = int(num_examples / (trainer.train_batch_size * accumulation) * trainer.num_train_epochs)
    if steps < 1:
        logging.warning(
            "--num_train_epochs=%s over %d %s makes %d batch(es) of --train_batch_size=%d, "
            "fewer than --num_accumulation_steps=%d: training 1 optimizer step of %d "
            "micro-batches (%d examples)", trainer.num_train_epochs, num_examples, what, batches,
            trainer.train_batch_size, accumulation, accumulation,
            accumulation * trainer.train_batch_size)
        steps = 1
    return steps, int(steps * trainer.warmup_proportion)


def outcome(runner):
    """The Result fields of a run's model (settings_lib.Result.update): global_step,
    steps_trained, eval_history (output_dir's eval_history.jsonl), best_checkpoint and
    best_metric (output_dir/best/)."""
    folder = runner.config.output_dir
    return {"global_step": runner.global_step, "steps_trained": runner.steps_trained,
            "eval_history": periodic_eval.read_history(
                os.path.join(folder, periodic_eval.HISTORY_FILE)),
            "best_checkpoint": periodic_eval.best_checkpoint(folder),
            "best_metric": periodic_eval.best_record(folder)}


_STAGE_TITLES = {"eval": "evaluation", "predict": "prediction"}


def log_stage(stage, lines):
    """The runners' header of a stage: "***** Running <stage> *****", then `lines`.

    `stage` "eval" and "predict" are spelled out as the reference's logs do.
    """
    logging.info("***** Running %s *****", _STAGE_TITLES.get(stage, stage))
    for line in lines:
        logging.info("  %s", line)


def fine_tune(trainer, runner, path, spec, loss_fn, counts, num_records, evaluate=None,
              metric_names=None):
    """Trains `runner` on the `num_records` records of `path` (the fine-tuning runners'
    training).

    Logs the run's header (`counts`: lines such as "Num examples = 10", then the
    batch size and steps) and reads the file with the reference's training pipeline:
    --train_batch_size, --seed, trimmed batches when the runner trims, batches grouped
    by length with --group_by_length. Grouping makes the batches of each epoch from
    that epoch alone: with fewer records than a batch it has none to make, and the
    reference's order (batches across epochs) is kept, with a warning. With
    --eval_every_n_steps, `evaluate(runner)` (-> the runner's eval metrics) runs during
    training (periodic_eval); `metric_names`, when known, lets a wrong --best_metric fail
    before the first step.
    """
    log_stage("training", list(counts) + ["Batch size = %d" % trainer.train_batch_size,
                                          "Num steps = %d" % runner.config.num_train_steps])
    grouped = bool(getattr(trainer, "group_by_length", False))
    if grouped and num_records < trainer.train_batch_size:
        logging.warning("--group_by_length: the %d training records are fewer than one "
                        "batch (--train_batch_size=%d), so no epoch holds a whole batch: "
                        "the batches are made as without the flag", num_records,
                        trainer.train_batch_size)
        grouped = False
    if grouped and not runner.trim_padding:
        logging.warning("--group_by_length without trimmed batches (--notrim_padding or a "
                        "TPU) changes the order only, not the work")
    evaluation = periodic_eval.from_settings(trainer, evaluate, metric_names)
    dataset_fn = input_pipeline.dataset_fn_for([path], spec, trainer.train_batch_size,
                                               is_training=True, seed=trainer.seed,
                                               trim_padding=runner.trim_padding,
                                               group_by_length=grouped)
    return runner.train(dataset_fn, loss_fn, global_batch_size=trainer.train_batch_size,
                        evaluation=evaluation)


# ---------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------

class Runner(prediction.PredictionLoop):
    """Owns the model, optimizer and checkpoints of one run under a strategy."""

    def __init__(self, strategy, model_fn, config, for_training=True):
        config.validate()
        # A training run owns its folder (the faces lock it before their first write);
        # one that fails before it starts (a checkpoint it cannot read) owns nothing.
        held = fileutil.held_output_locks()
        fileutil.prepare_output_dir(config.output_dir, lock=for_training)
        try:
            self._build(strategy, model_fn, config, for_training)
        except BaseException:
            fileutil.release_output_locks(keep=held)
            raise

    def _build(self, strategy, model_fn, config, for_training):
        """The model, optimizer and checkpoint manager under `strategy`, restored."""
        self.strategy = strategy
        self.config = config
        with strategy.scope():
            self.model = model_fn()
            if not self.model.built:
                # Variable shapes do not depend on the sequence length.
                self.model(heads.dummy_features())
            if config.gradient_checkpointing and for_training:
                if not modeling.set_gradient_checkpointing(self.model):
                    raise ValueError("--gradient_checkpointing: the model has no BERT encoder")
            if self.skip_padding:
                modeling.set_skip_padding(self.model)
            modeling.set_key_trimming(self.model, self.trims_keys)
            self.optimizer = None
            self.steps_trained = 0  # by the last train() call
            if for_training:
                self.optimizer = optimization.create_optimizer(
                    config.learning_rate, max(config.num_train_steps or 0, 1),
                    config.num_warmup_steps, optimizer_type=config.optimizer_type,
                    fused=config.fused_optimizer, clip_norm=1.0,
                    # Op-by-op path with XLA: each variable's update one kernel.
                    jit_compile=config.enable_xla,
                    learning_rate_multipliers=config.learning_rate_multipliers)
                if config.dtype == "fp16":
                    from official.modeling import performance
                    self.optimizer = performance.configure_optimizer(self.optimizer,
                                                                     use_float16=True)
                # Slots exist before a restore so their values are restored too.
                optimization.create_slots(self.optimizer, self.model.trainable_variables)
            objects = {"model": self.model}
            if self.optimizer is not None:
                objects["optimizer"] = self.optimizer
            self.checkpoint = tf.train.Checkpoint(**objects)
        self.is_chief = is_chief(strategy)
        # Every worker of a multi-worker run takes part in saving; only the
        # chief writes to output_dir, the others to a scratch folder of their own.
        directory = config.output_dir if self.is_chief else os.path.join(
            config.output_dir, ".worker_%d" % strategy.cluster_resolver.task_id)
        self.manager = checkpoints.Manager(
            self.checkpoint, directory, max_to_keep=config.keep_checkpoint_max or None,
            checkpoint_name=CHECKPOINT_NAME)
        self.saved = []  # the checkpoints this Runner wrote, oldest first
        self._restore()  # a restart's removal first: the folders it made go with it
        self._written = written_files.Run(directory if self.is_chief else None)

    # -- checkpoints ---------------------------------------------------------

    def _restore(self):
        """Restores what the run starts from, as restore_plan.plan resolved it (the rule
        and every check that may refuse the run are there): --init_checkpoint loaded by
        name (its step is reported by a run that does not train, eval_results.txt's
        global_step; training counts from 0), or output_dir's latest checkpoint restored
        whole (weights, optimizer slots, step)."""
        plan = restore_plan.plan(self.model, self.config, training=self.optimizer is not None,
                                 remove=self.is_chief)
        self.decision = plan.decision
        self.restored_from = plan.prefix  # the checkpoint restored (a prefix), None: none
        self._restored_step = 0
        self.finished = plan.finished  # a finished --keep_best_only folder: nothing trains
        if plan.source in (restore_plan.INIT, restore_plan.BEST):
            with self.strategy.scope():
                checkpoints.load_checkpoint(self.model, plan.prefix, flag=restore_plan.INIT_FLAG)
            self._restored_step = checkpoints.checkpoint_step(plan.prefix)
        elif plan.source == restore_plan.LATEST:
            latest = plan.prefix
            try:
                status = self.checkpoint.restore(fileutil.readable_checkpoint(latest))
            except (IndexError, tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
                raise checkpoints.unreadable(latest, e, plan.advice) from None
            except (ValueError, tf.errors.OpError) as e:
                raise ValueError(
                    "--output_dir=%s holds the checkpoint %s of a different model (another "
                    "task, head or bert_config): use a new --output_dir. Details: %s"
                    % (self.config.output_dir, latest, str(e).splitlines()[0])) from None
            status.expect_partial()
            if self.optimizer is None:  # nothing will train a variable it lacks
                checkpoints.check_serves(self.model, latest)
            self._restored_step = checkpoints.step_in_name(latest)
            logging.info("Restored %s (step %d)", latest, self._restored_step)

    @property
    def global_step(self):
        """The number of optimizer steps taken (restored ones included)."""
        if self.optimizer is not None and getattr(self, "finished", None) is None:
            return int(self.optimizer.iterations.numpy())
        return self._restored_step

    def save(self):
        """Writes a checkpoint of the current step; returns its path."""
        with self._written.saving(CHECKPOINT_NAME, self.global_step):
            path = fileutil.save_checkpoint(self.manager, self.global_step)
        self.saved.append(path)
        logging.info("Saved checkpoint %s", path)
        return path

    def _keep_best_only(self):
        """--keep_best_only at the end of training: removes the folder's checkpoints that
        training recorded writing (this run's and those of the runs it resumed:
        written_files), and the state file with them, leaving best/; none when best/ holds
        nothing. The folder is then the same however often the training was stopped."""
        directory = self.manager.directory
        if periodic_eval.best_checkpoint(directory) is None:
            logging.warning("--keep_best_only: %s holds no best checkpoint (no evaluation "
                            "improved on --best_metric), so the run's checkpoints stay",
                            os.path.join(directory, periodic_eval.BEST_DIR))
            return
        if self.config.record is not None and self.is_chief:
            training_record.finish(directory, self.global_step,
                                   periodic_eval.best_checkpoint(directory))
        removed = checkpoints.remove_written_checkpoints(directory)
        logging.info("--keep_best_only: removed %d checkpoint(s) of the training; the model "
                     "is in %s", removed, periodic_eval.best_checkpoint(directory))

    def _distribute(self, dataset_fn, autotune=True):
        """The dataset of `dataset_fn` as the strategy's steps read it.

        tf.distribute reads a distributed dataset through a multi-device iterator
        that copies batches to the replicas' devices; its per-device stage is a
        generator dataset that TensorFlow cannot optimise (and warns so on every
        run). One device on the host's CPU needs no copy: the dataset is read as
        it is (one input pipeline, as tf.distribute would make it), the same
        batches in the same order. GPUs, TPUs and several replicas keep
        tf.distribute's input.

        autotune=False (prediction): on the host's CPU, tf.data's autotuning is
        turned off. Its background re-planning competes with the model for the same
        cores; on 2 cores a forward pass over SST-2 dev (MiniLM, trimmed batches)
        ran at either ~245 or ~169 examples/s, the slow mode in a third to two
        thirds of the passes, and at 231-249 every time without it. Prediction's
        pipeline (decode, sort by length, trim) is light; the batches are the same.
        Training steps are heavy enough not to show it (55 examples/s either way),
        so training keeps autotuning.
        """
        if isinstance(self.strategy, tf.distribute.OneDeviceStrategy):
            device = self.strategy.extended.worker_devices[0]
            if tf.DeviceSpec.from_string(device).device_type == "CPU":
                with tf.device(device):
                    dataset = dataset_fn(tf.distribute.InputContext())
                if not autotune:
                    options = tf.data.Options()
                    options.autotune.enabled = False
                    dataset = dataset.with_options(options)
                return dataset
        return self.strategy.distribute_datasets_from_function(dataset_fn)

    # -- training ------------------------------------------------------------

    def _gradients(self, loss_fn, features, scale, seed=None):
        """Loss, metrics and (unscaled, dense) gradients of `scale * loss` on one micro-batch
        (its dropout masks from `seed` when given: _step_seed)."""
        opt, variables = self.optimizer, self.model.trainable_variables
        seeds = contextlib.nullcontext() if seed is None else dropout_masks.step_seeds(seed)
        with seeds, tf.GradientTape() as tape:
            loss, metrics = loss_fn(self.model, features, True)
            scaled = loss * scale
            if hasattr(opt, "get_scaled_loss"):
                scaled = opt.get_scaled_loss(scaled)
        grads = tape.gradient(scaled, variables)
        if hasattr(opt, "get_unscaled_gradients"):
            grads = opt.get_unscaled_gradients(grads)
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in grads]
        return loss, metrics, grads

    def _replica_step(self, gradients_fn, micro_batches):
        """One optimizer step on this replica.

        The gradients of the micro-batches are summed (each loss divided by the
        number of micro-batches and of replicas, so the sum is the gradient of
        the mean loss), summed across replicas, and applied once (the optimizer
        clips them to global norm 1.0 first).
        """
        variables = self.model.trainable_variables
        n = len(micro_batches)
        scale = 1.0 / (num_replicas() * n)
        total, losses, metrics = None, [], {}
        seed = self._step_seed()
        for i, features in enumerate(micro_batches):
            loss, step_metrics, grads = gradients_fn(
                features, scale, None if seed is None else
                tf.random.experimental.stateless_fold_in(seed, i))
            total = grads if total is None else [
                a if b is None else (b if a is None else a + b) for a, b in zip(total, grads)]
            losses.append(loss)
            for k, v in step_metrics.items():
                metrics.setdefault(k, []).append(v)
        if num_replicas() > 1:
            present = [g for g in total if g is not None]
            reduced = iter(tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, present))
            total = [None if g is None else next(reduced) for g in total]
        # The optimizer clips to global norm 1.0 (inside the fused update).
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(total, variables) if g is not None],
            experimental_aggregate_gradients=False)
        out = {"loss": tf.add_n(losses) / n}
        out.update({k: tf.add_n(v) / n for k, v in metrics.items()})
        return out

    def _step_seed(self):
        """--deterministic_data: the [2] seed of this step's dropout masks, from --seed,
        the step's number and the replica, so that a resumed run draws the masks the
        uninterrupted run drew (dropout_masks.step_seeds); else None (the stateful stream)."""
        if not self.config.deterministic_data:
            return None
        seed = tf.stack([tf.constant(self.config.seed, tf.int64),
                         tf.cast(self.optimizer.iterations, tf.int64)])
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        return tf.random.experimental.stateless_fold_in(seed, tf.cast(replica, tf.int64))

    def _make_train_loop(self, loss_fn):
        """The training call: num_steps steps (fewer when the variable _loop_stop, the
        SIGTERM watch's, turns True: it is read after each step) and their mean metrics."""
        strategy = self.strategy
        stop = getattr(self, "_loop_stop", None)
        n_micro = self.config.num_accumulation_steps

        def gradients_fn(features, scale, seed):
            return self._gradients(loss_fn, features, scale, seed)

        if self.config.enable_xla:
            # Only the forward and backward pass is compiled: XLA cannot place the
            # optimizer's update of mirrored variables.
            gradients_fn = run_function(gradients_fn, jit_compile=True,
                                        autograph=self.config.autograph)
            _warn_compiled_steps_kept()

        def one_step(iterator):
            micro = [next(iterator) for _ in range(n_micro)]
            per_replica = strategy.run(
                lambda *m: self._replica_step(gradients_fn, list(m)), args=tuple(micro))
            return {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                    for k, v in per_replica.items()}

        one_step = run_function(step_function(one_step, self.config.autograph),
                                autograph=self.config.autograph)

        progress_after = self._progress_in_loop()

        def train_loop(iterator, num_steps):
            """num_steps optimizer steps in one call; returns the mean metrics.

            The loop's one call of one_step makes every step. A second call before the
            loop held a second copy of the step, and so of its stateful dropout-seed op,
            starting from the same state as the first: the masks of one step came back at
            another. The sums start at -0.0, which adds exactly.
            """
            last_line = tf.timestamp()
            outputs = one_step.get_concrete_function(iterator).structured_outputs
            sums = {k: tf.constant(-0.0, v.dtype) for k, v in outputs.items()}
            done = tf.constant(0)
            for _ in tf.range(num_steps):
                values = one_step(iterator)
                last_line = progress_after(values, last_line)
                sums = {k: sums[k] + values[k] for k in sums}
                done += 1
                if stop_requested():  # a SIGTERM: the call ends after this step
                    break
            return {k: v / tf.cast(done, v.dtype) for k, v in sums.items()}

        def stop_requested():
            return False if stop is None else stop.read_value()

        return run_function(train_loop)

    def _progress_in_loop(self):
        """progress_after(step metrics, time of the last report) for the training loop.

        Inside one call of --iterations_per_loop steps, a step ending at least
        --log_every_seconds after the last report (or the call's start) reports to
        the host (every progress.REDRAW_SECONDS when the display is drawn in place),
        so that long calls show progress; the steps and their numbers are untouched
        (the check reads the clock after each step). 0 seconds, or a TPU (whose host
        loop cannot call Python), gives only the report after each call.
        """
        every = float(self.config.log_every_seconds or 0)
        if every <= 0 or isinstance(self.strategy, (tf.distribute.TPUStrategy,
                                                    tf.distribute.experimental.TPUStrategy)):
            return lambda values, last_line: last_line
        display = getattr(self, "_display", None)  # None: a loop made outside train()
        every = min(every, getattr(display, "interval", None) or every)

        # A py_function's Python callable lives as long as TensorFlow's global default graph
        # (the outermost graph of every tf.function traced eagerly): it holds the Runner
        # only weakly, or every run's model and optimizer would stay in memory with it.
        runner = weakref.ref(self)

        def progress_after(values, last_line):
            names = sorted(values)
            with tf.control_dependencies([values[k] for k in names]):
                now = tf.timestamp()

            def log_line():
                logged_at = tf.py_function(
                    lambda *t: _log_line_of(runner, names, *t),
                    [self.optimizer.iterations, last_line, now] + [values[k] for k in names],
                    tf.float64)
                logged_at.set_shape([])  # the loop carries it: a scalar, as it came in
                return logged_at
            return tf.cond(now - last_line >= every, log_line, lambda: last_line)
        return progress_after

    def _log_line_in_loop(self, names, step, last_line, now, *values):
        """The progress report from inside a training call: the display, and the log's
        line once --log_every_seconds have passed since its last one; returns its time."""
        step, last_line, now = int(step), float(last_line), float(now)
        state = self._progress
        rate = (step - state["step"]) / max(now - last_line, 1e-9)
        metrics = {name: float(v) for name, v in zip(names, values)}
        self._show_progress(step, metrics["loss"], float(self.optimizer_learning_rate()))
        if time.time() - state["logged_at"] >= float(self.config.log_every_seconds):
            self._log_line(step, metrics, rate * state["examples_per_step"])
        state["step"] = step
        return now

    def _show_progress(self, step, loss, lr):
        """Updates the training display to `step`."""
        state = self._progress
        self._display.update(step, (step - state["start_step"]) * state["examples_per_step"]
                             or None, loss, lr)

    def _log_line(self, step, metrics, examples_per_second):
        """The log's progress line of `step`, when the log shows details."""
        if logs.details_shown():
            logging.info(self._progress_text(step, metrics, examples_per_second))
        self._progress.update(logged_step=step, logged_at=time.time())

    def _progress_text(self, step, metrics, examples_per_second):
        """"step N/M, loss L, lr R, <metrics>, E examples/s, ETA h:m:s" for the log."""
        state = self._progress
        elapsed = time.time() - state["start_time"]
        remaining = (self.config.num_train_steps - step) * elapsed / max(
            step - state["start_step"], 1)
        parts = ["step %d/%d" % (step, self.config.num_train_steps),
                 "loss %.4f" % metrics["loss"], "lr %.3g" % float(self.optimizer_learning_rate())]
        parts += ["%s %.4f" % (k, v) for k, v in sorted(metrics.items()) if k != "loss"]
        if state["examples_per_step"]:
            parts.append("%.1f examples/s" % examples_per_second)
        parts.append("ETA %s" % time.strftime("%H:%M:%S", time.gmtime(remaining)))
        return ", ".join(parts)

    def train(self, dataset_fn, loss_fn, global_batch_size=None, evaluation=None):
        """Trains up to config.num_train_steps optimizer steps.

        Args:
          dataset_fn: input_context -> tf.data.Dataset of per-replica batches.
          loss_fn: (model, features, is_training) -> (scalar loss over this
            replica's batch, dict of scalar metrics); called positionally.
          global_batch_size: examples per micro-batch over all replicas, for
            the examples/s figures.
          evaluation: a periodic_eval.PeriodicEval (--eval_every_n_steps): a
            checkpoint and an evaluation at each of its steps, maybe an early stop.
        """
        if self.optimizer is None:
            raise ValueError("this Runner was built without an optimizer")
        if self.finished is not None:  # a finished --keep_best_only folder: best/'s model
            logging.warning("trained 0 steps: --output_dir=%s finished training at step %d",
                            self.config.output_dir, self.finished)
            return {}
        start = self.global_step
        with termination_watch.TerminationWatch() as termination:
            self._termination = termination  # read between prediction batches too
            try:
                if evaluation is not None and evaluation.start(self, self.config.num_train_steps):
                    metrics = {}
                    why = "early stopping ended the training before"
                else:
                    metrics = self._train(dataset_fn, loss_fn, global_batch_size, evaluation,
                                          termination)
                    why = "--output_dir=%s already" % self.config.output_dir
            finally:
                self._termination = None
        if self.config.keep_best_only and evaluation is not None:
            self._keep_best_only()
        self.steps_trained = self.global_step - start
        if self.steps_trained:
            logging.info("trained %d steps (global step %d)", self.steps_trained, self.global_step)
        else:
            logging.warning("trained 0 steps: %s at step %d", why, self.global_step)
        return metrics

    def _train(self, dataset_fn, loss_fn, global_batch_size, evaluation, termination):
        """Runner.train after the evaluations' start, under the SIGTERM watch."""
        cfg = self.config
        step = self.global_step
        if step >= cfg.num_train_steps:
            logging.info("Already at step %d of %d: nothing to train", step, cfg.num_train_steps)
            return {}
        if cfg.deterministic_data and step > 0:
            dataset_fn = self._skip_trained_batches(dataset_fn, step)
        dataset = self._distribute(dataset_fn)
        iterator = iter(dataset)
        # Trimmed batches on CPUs: the dropout mask programs compiled before the first step.
        first_call.compile_dropout_masks(self.strategy, self.model, dataset.element_spec,
                                         self.trim_padding and not cfg.enable_xla)
        self._display = progress.Stage("train", cfg.num_train_steps, cfg.progress,
                                       cfg.log_every_seconds, start_step=step,
                                       shown=self.is_chief)
        # A stop within a step; not on several workers (or a TPU), whose steps are collective:
        # a worker leaving its loop alone would hang the others (there: after the loop).
        self._loop_stop = (termination.stop if getattr(self.strategy, "cluster_resolver", None)
                           is None else None)
        train_loop = self._make_train_loop(loss_fn)
        writer = tf.summary.create_file_writer(os.path.join(cfg.output_dir, "train")) \
            if self.is_chief else tf.summary.create_noop_writer()
        examples_per_step = (global_batch_size or 0) * cfg.num_accumulation_steps
        self._progress = {"start_time": time.time(), "start_step": step, "step": step,
                          "examples_per_step": examples_per_step, "logged_step": step,
                          "logged_at": time.time()}
        logging.info("Training from step %d to %d", step, cfg.num_train_steps)
        if cfg.record is not None and self.decision.append and self.is_chief:
            training_record.write(cfg.output_dir, cfg.record, step, self.decision.record)
        try:
            metrics = self._train_loops(train_loop, iterator, writer, examples_per_step,
                                        termination, evaluation)
        except KeyboardInterrupt:
            raise Interrupted(self._interrupted_text()) from None
        finally:
            self._display.close()
        writer.flush()
        return metrics

    def _interrupted_text(self):
        """The one line of a Ctrl-C in training: the step, and where a rerun resumes."""
        latest = path_match.latest_checkpoint(self.manager.directory)
        if latest:
            return ("interrupted at step %d; rerun the same command to resume from %s"
                    % (self.global_step, latest))
        return ("interrupted at step %d, before the first checkpoint "
                "(--save_checkpoints_steps=%d); rerun the same command to start again"
                % (self.global_step, self.config.save_checkpoints_steps))

    def _train_loops(self, train_loop, iterator, writer, examples_per_step, termination,
                     evaluation=None):
        cfg = self.config
        last = cfg.num_train_steps
        step = self.global_step
        metrics = {}
        while step < last:
            to_checkpoint = cfg.save_checkpoints_steps - step % cfg.save_checkpoints_steps
            n = min(cfg.iterations_per_loop, last - step, to_checkpoint)
            if evaluation is not None:
                n = min(n, evaluation.steps_to_next(step, last))
            loop_start = time.time()
            with first_call.lean_rewrites(first_call.on_cpus(self.strategy)):
                values = train_loop(iterator, tf.constant(n))
            metrics = {k: float(v) for k, v in values.items()}
            n = self.global_step - step  # fewer than asked when a SIGTERM ended the call
            if not np.isfinite(metrics["loss"]):
                raise ValueError("training loss became %s at step %d (learning rate too high, "
                                 "or bad input data?)" % (metrics["loss"], step + n))
            step = self.global_step
            self._log_progress(writer, step, loop_start, n, examples_per_step, metrics)
            evaluate = evaluation is not None and evaluation.due(step, last)
            # An evaluation's step is also a checkpoint: a resumed run goes on after it.
            if (step % cfg.save_checkpoints_steps == 0 or step >= last
                    or termination.requested or evaluate):
                self.save()
            if termination.requested:
                logging.warning("SIGTERM received: checkpoint at step %d written, stopping", step)
                raise SystemExit(143)
            if evaluate and evaluation.run(step):
                break
        return metrics

    def _skip_trained_batches(self, dataset_fn, step):
        """Wraps dataset_fn so that each input pipeline resumes where `step` left it."""
        replicas = self.strategy.num_replicas_in_sync
        per_step = self.config.num_accumulation_steps

        def resumed(input_context=None):
            pipelines = input_context.num_input_pipelines if input_context else 1
            skip = step * per_step * max(replicas // pipelines, 1)
            logging.info("Deterministic data: skipping %d batches already trained on", skip)
            return dataset_fn(input_context).skip(skip)
        return resumed

    def _log_progress(self, writer, step, loop_start, n, examples_per_step, metrics):
        """The display, the line and TensorBoard scalars after a call (mean metrics of its
        steps); the log's line when the log shows details (logs.details_shown)."""
        steps_per_sec = n / max(time.time() - loop_start, 1e-9)
        lr = float(self.optimizer_learning_rate())
        self._show_progress(step, metrics["loss"], lr)
        if self._progress["logged_step"] != step:  # else the loop logged this step's line
            self._log_line(step, metrics, steps_per_sec * examples_per_step)
        self._progress["step"] = step
        scalars = dict(metrics, learning_rate=lr)
        if examples_per_step:
            scalars["examples_per_second"] = steps_per_sec * examples_per_step
        summaries.write_scalars(writer, step, scalars)

    def optimizer_learning_rate(self):
        """Learning rate the next update will use."""
        opt = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        lr = opt.learning_rate if hasattr(opt, "learning_rate") else opt._get_hyper("learning_rate")
        if callable(lr):
            return lr(opt.iterations)
        return lr


def _log_line_of(runner, names, step, last_line, now, *values):
    """Runner._log_line_in_loop of the Runner `runner` (a weakref) refers to; only the
    time when the Runner is gone (a loop cannot outlive its Runner: never in practice)."""
    target = runner()
    if target is None:
        return float(now)
    return target._log_line_in_loop(names, step, last_line, now, *values)  # pylint: disable=protected-access


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during Runner.train; its text (one line) says where a rerun resumes."""
