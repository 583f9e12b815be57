"""What the converters ask a head: the HuggingFace export and import (convert/hf_export,
convert/huggingface), the keras-hub preset (convert/keras_hub) and an export's check of the
checkpoint it reads. ModelType (base.py) takes these methods from ConverterQuestions; a
head's room overrides the ones its head answers differently.

Contract with the converters: written_from(held) says which checkpoints a conversion of
this head may read; hf_weights(config) the {TF1 name: HF key} and shapes of its HF class;
hf_task / hf_sentence / task_type_of its labels, config.json fields and sentence settings
(HF's differences appended to `notes`); keras_hub_task / keras_hub_files its keras-hub
task's arguments and the files its preset carries. The HF names come from base/hf_names
(below export/ and convert/: no import up the floors, tests/test_layout.py); the rest is
imported when called, so the registry loads without TensorFlow.
"""


class ConverterQuestions:
    """The converters' questions, answered for a head with no task of its own (the
    encoder's answers); the data they read (hf_prefix, hf_pooler, hf_head_keys,
    checks_head, part_of, label_variable) are ModelType's fields."""

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
