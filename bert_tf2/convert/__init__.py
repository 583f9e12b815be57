"""Model formats of other projects, both ways (HuggingFace).

Contracts with the other modules (bert_tf2/convert/huggingface.py, hf_export.py; the name
tables in bert_tf2/base/hf_names.py (convert_hf_checkpoint.py, both directions)):
HuggingFace's format both ways, every public name importable from huggingface (the import
there, the export in hf_export, the shared name tables in base/hf_names): config (convert_config: HF
-> bert_config.json; hf_config_of: back, `gelu` <-> `gelu_new`, `gelu_exact` <-> `gelu`), names
(tf1_name_for / hf_key_for: one table, dense kernels transposed, `output_weights` [units, H] as
they are). From HF: convert(hf_dir, output_dir, write_tf2) (read_hf_weights, convert_weights).
To HF: export_to_hf(init_checkpoint, output_dir, model_type=None, labels_file=None) -> {what:
path}; HfExport resolves everything before a file is written: the head from the checkpoint's
names (head_of, the registry's held_by: tagger / classifier / squad / multiple_choice /
pretraining, else encoder; a --model_type that contradicts it is refused, `encoder` always
works), labels and kind from the
folder's files (classifier_tasks.export_task, ner_data.read_labels; rows of the head checked
against the label count), casing and length from model_folder.read (hf_export.export_casing: the folder's record, else
--do_lower_case, else True warned on a cased vocab; a contradicting flag used, warned; keras_hub too); refused: a BiLSTM
(feature-based) tagger, --long_text=windows; explained in one warning line: head_tail,
multi-label's threshold, a --crf tagger (crf_transitions.json beside: learned transitions,
Viterbi's with the tag scheme's penalties, start scores). The new folder is written whole
beside output_dir (fileutil.temp_name; a remote one by way of a local scratch folder) with its
OUTPUTS_RECORD, then renamed into place by fileutil.replace_folder (recover_folder first undoes
a killed export); a file of someone else there (output_folder.check_outputs, or any name an export
does not write) is refused before anything is written; a symlinked output_dir has its target
replaced. convert() (the import; also convert_tf1_checkpoint.py and keras_hub.py both ways)
builds its folder aside the same way through output_folder.write_outputs_aside (the folder's other
files carried in). convert() of a BertForSequenceClassification / BertForTokenClassification folder also
writes label_list.txt (id2label), classifier_task.json (problem_type) and model_settings.json
(tokenizer_config.json's casing and model_max_length), so HF -> ours -> HF is the same.
tests/test_hf_export.py checks every head against transformers in the peer venv
(tests/hf_peer_check.py, skipped without it).
"""
