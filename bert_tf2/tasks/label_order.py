"""A trained head's label order: the one check of every reader of --labels_file.

The label_list.txt beside a classifier's or tagger's checkpoint is the order of its outputs
(output i is label i). Any other list given for that model — a --labels_file, or the labels
a run's task brings (run_classifier's built-in or plugged-in processor) — must name the
same labels in the same order: otherwise the trained outputs would be renamed, and every
answer would carry another label, without an error. Where the folder has no label list,
the given list is the only one and is taken as it is.

Contracts with the other modules (bert_tf2/tasks/label_order.py):
`check(labels, given, folder_list, read, advice="")` -> labels: the one comparison and its
message (one line naming both lists and the first difference); `folder_list` is the path of
the folder's label_list.txt or None (no list: nothing to check), `read` the reader of that
file (fileutil.read_label_list, multilabel_data.read_labels, ner_data.read_labels),
`advice` the end of the message (training_record.way_out). `read_labels_file(labels_file,
folder_list, read, advice="")` -> labels or None: a --labels_file read and checked so, else
the folder's list. Its callers:
run_classifier (classifier_tasks.processor_of / check_labels), run_ner
(ner_task.labels_of), export_saved_model (classifier_tasks.export_task,
head_classes.Tagger.export_labels) and convert_hf_checkpoint --direction=to_hf
(classifier_tasks.hf_task, ner_data.hf_task); tests/test_label_order.py runs every root
face defining labels_file against a folder whose list is in another order.
"""


def _listed(labels):
    return ", ".join(str(label) for label in labels)


def _first_difference(saved, labels):
    """Where two different label lists first differ, in words (the folder's "there")."""
    for index, (theirs, ours) in enumerate(zip(saved, labels)):
        if theirs != ours:
            return "output %d: %r there, %r here" % (index, theirs, ours)
    return "%d labels there, %d here" % (len(saved), len(labels))


def check(labels, given, folder_list, read, advice=""):
    """`labels` (what `given` names: "--labels_file=PATH", "--task_name=X") when the
    folder's label list at `folder_list` (None: the folder has none) lists the same labels
    in the same order; else ValueError naming both and the first difference, ended by
    `advice` (else, for a --labels_file, how to give it)."""
    if not folder_list:
        return labels
    saved = read(folder_list)
    if list(saved) != list(labels):
        if not advice and given.startswith("--labels_file"):
            advice = ": give --labels_file in that order, or leave it out"
        raise ValueError("%s lists the labels %s, the model's outputs in order; %s has %s "
                         "(%s)%s" % (folder_list, _listed(saved), given, _listed(labels),
                                     _first_difference(saved, labels), advice))
    return labels


def read_labels_file(labels_file, folder_list, read, advice=""):
    """The label list of a model folder: that of `labels_file` (a --labels_file, read by
    `read`) checked against the folder's own at `folder_list` (check); without one, the
    folder's list; None when neither is there."""
    if labels_file:
        return check(read(labels_file), "--labels_file=%s" % labels_file, folder_list, read,
                     advice)
    return read(folder_list) if folder_list else None
