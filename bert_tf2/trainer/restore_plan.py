"""What a run starts from, resolved once before anything is loaded (training.Runner).

`plan` reads everything the choice needs, in one place: --init_checkpoint (resolved to
a prefix), output_dir's latest checkpoint, whether the first holds every variable of
the model, the folder's training_record.json (training_record.decide: continue,
refuse or restart), and the files a run starting from nothing would replace. Every
check that can refuse the run is made here, in the order the rule states, so that a
checkpoint that cannot be read is a ValueError before the model is touched; the
Runner then only loads what the frozen `RestorePlan` names.

The rule. A run that does not train uses the checkpoint --init_checkpoint names (a
prefix, or a folder's latest) when it holds the whole model, else output_dir's latest
(as the reference did for a pre-trained --init_checkpoint, which lacks the task head).
A training run resumes output_dir's latest checkpoint before loading --init_checkpoint,
as TPUEstimator did. A line names both when they differ. Never a random model, an
older checkpoint, or a run from step 0 over a folder's checkpoints or history (but
a folder a --keep_best_only run finished: its rerun trains nothing and uses best/).

Contracts with the other modules (bert_tf2/trainer/restore_plan.py):
plan(model, config, training, remove=True) -> RestorePlan (frozen: source INIT / LATEST /
BEST / None, prefix, decision (training_record.Decision), advice, finished): what a run
starts from, resolved once before anything is loaded. BEST: a training run in a folder a
--keep_best_only run finished with the same settings (training_record.finished_best):
best/'s model loaded by name, `finished` the step training ended at, nothing trains. It makes every check that may refuse the run
(--init_checkpoint resolved, output_dir's latest, the whole model in the named checkpoint,
training_record.decide, refuse_orphans, the latest's files readable), in the rule's order,
and logs the lines naming both checkpoints; training.Runner._restore then only loads what
the plan names.
"""
import dataclasses

from absl import logging

from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import training_record

# RestorePlan.source: load --init_checkpoint by name, or restore output_dir's latest
# checkpoint whole (weights, optimizer slots, step); None: nothing to restore.
# BEST: best/'s model of a folder a --keep_best_only run finished (finished: its step),
# loaded by name; nothing trains.
INIT, LATEST, BEST = "init", "latest", "best"
INIT_FLAG = "--init_checkpoint"
# What a run starting from no checkpoint would replace from nothing.
_ORPHANS = (periodic_eval.HISTORY_FILE, periodic_eval.BEST_DIR)


@dataclasses.dataclass(frozen=True)
class RestorePlan:
    """source: INIT, LATEST or None; prefix: the checkpoint (None with no source);
    decision: the training_record.Decision (a new record unless a checkpoint was found);
    advice: for LATEST, what to do when its files turn out damaged."""
    source: str = None
    prefix: str = None
    decision: training_record.Decision = dataclasses.field(
        default_factory=training_record.Decision)
    advice: str = None
    finished: int = None


def plan(model, config, training, remove=True):
    """The RestorePlan of a run: `model` built (its variables named), `config` a
    training.RunConfig (output_dir, init_checkpoint, record, existing_checkpoint,
    num_train_steps), `training` whether it trains; remove=False (a worker that is not
    the chief) leaves a restart's removal to the chief. Raises the ValueError of the
    first check that refuses the run."""
    out, init = config.output_dir, config.init_checkpoint
    if init and not training:
        named = checkpoints.resolve_checkpoint(init, INIT_FLAG)
        latest = checkpoints.latest_checkpoint(out, strict=False)
        lacking = checkpoints.missing_variables(model, named, INIT_FLAG)
        if not lacking and (latest is None or not checkpoints.same_checkpoint(named, latest)):
            if latest is not None:
                logging.info("Using --init_checkpoint=%s (%s), not the latest checkpoint "
                             "of --output_dir %s (%s)", init, named, out, latest)
            checkpoints.check_serves(model, named, INIT_FLAG)  # nothing trains what it lacks
            return RestorePlan(INIT, named)
        if lacking and latest is not None:
            logging.info("--init_checkpoint=%s lacks %d of the model's variables (%s...: a "
                         "pre-trained model without the task head): using the latest "
                         "checkpoint of --output_dir %s (%s), as the reference did", init,
                         len(lacking), lacking[0], out, latest)
    latest = checkpoints.latest_checkpoint(out)
    decision = training_record.Decision()  # a new folder, or a checkpoint set aside
    if latest and training and config.record is not None:
        decision = training_record.decide(
            out, config.record, training_record.mode_of(config.existing_checkpoint),
            checkpoints.step_in_name(latest), config.num_train_steps, remove=remove,
            init_checkpoint=init)
        if decision.restart:
            latest = None
    if latest:
        if init and training and not checkpoints.names_checkpoint(init, latest):
            logging.info("Resuming from %s, the latest checkpoint of --output_dir %s, not "
                         "--init_checkpoint=%s (a training run resumes its output_dir, as "
                         "TPUEstimator did)", latest, out, init)
        advice = checkpoints.state_file_advice(out, latest)
        checkpoints.open_reader(latest, advice)
        return RestorePlan(LATEST, latest, decision, advice)
    if training and config.record is not None:
        done = training_record.finished_best(out, config.record)
        if done:
            logging.info("--output_dir=%s finished training at step %d with these settings "
                         "(%s) and keeps its model in best/ alone (--keep_best_only): "
                         "training nothing; evaluating and predicting with best/'s model %s",
                         out, done[1], training_record.RECORD_FILE, done[0])
            return RestorePlan(BEST, done[0], training_record.Decision(append=False),
                               finished=done[1])
    if training or not init:
        checkpoints.refuse_orphans(out, _ORPHANS)
    if init:
        named = checkpoints.resolve_checkpoint(init, INIT_FLAG)
        if not training:
            checkpoints.check_serves(model, named, INIT_FLAG)
        return RestorePlan(INIT, named, decision)
    if not training:
        logging.warning(
            "No checkpoint in --output_dir=%s and no --init_checkpoint: evaluating "
            "and predicting with a randomly initialised model", out)
    return RestorePlan(None, None, decision)
