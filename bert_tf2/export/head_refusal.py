"""The one refusal of a checkpoint that lacks the head a door needs (masked_lm.Predictor and
extract_features' fill-mask, every export_saved_model --model_type): it says what the model
folder is (the runner its model_settings.json names) and how that model is exported, never a
guessed cause. Lacking encoder variables (bert/...) mean another bert_config.

Contracts with the other modules (bert_tf2/export/head_refusal.py): `error(model_type,
checkpoint, lacking, needs)` -> the ValueError to raise; `needs` ends the message with what
the type needs ("a masked_lm model is made by run_pretraining"). It imports trainer/ and,
when called, the registry (head_types.type_of_runner: the type a runner's folder exports as).
"""
from bert_tf2.trainer import model_folder


def error(model_type, checkpoint, lacking, needs):
    """The one-line ValueError of `checkpoint` (a folder or prefix), which lacks the TF1
    variables `lacking` of a `model_type` model."""
    shown = ", ".join(lacking[:3]) + (", ..." if len(lacking) > 3 else "")
    if any(name.startswith("bert/") for name in lacking):
        return ValueError("checkpoint %s lacks %d variable(s) of the %s model (%s): its "
                          "encoder is not the one bert_config_file describes "
                          "(num_hidden_layers, ...)" % (checkpoint, len(lacking), model_type,
                                                        shown))
    from bert_tf2.export import head_types  # pylint: disable=import-outside-toplevel
    runner = model_folder.read(checkpoint)[0].get("runner")
    exported_as = head_types.type_of_runner(runner) if runner else None
    if exported_as:
        return ValueError("checkpoint %s is %s's model (its %s), not a %s model (it lacks %s): "
                          "%s; this one exports as --model_type=%s"
                          % (checkpoint, runner, model_folder.SETTINGS_FILE, model_type, shown,
                             needs, exported_as))
    return ValueError("checkpoint %s has no head of a %s model (it lacks %s): %s"
                      % (checkpoint, model_type, shown, needs))
