"""export_saved_model.py's flag tables: where the export goes and what task it serves, and
the flags of one --model_type each (as settings_lib.define_flag_table reads them)."""
from bert_tf2 import heads
from bert_tf2.export import exporter

SERVING_POLICIES = exporter.SERVING_POLICIES


# (kind, name, default, help[, choices]): where the export goes and what task it serves.
EXPORT_FLAGS = (
    ("string", "export_dir", None,
     "Directory the SavedModel is written to (made if missing; or --export_base, TF "
     "Serving's numbered version folders). An earlier export there is "
     "replaced only once the new one (with --litert's models) is complete, and stays as it "
     "was after any failure: what the export wrote is replaced, files added to it (such as "
     "TF Serving's assets.extra/tf_serving_warmup_requests) are kept; files of someone else "
     "inside its assets/ or variables/, and any other existing file or folder, are an "
     "error. A symlink has its target replaced (the link kept); a mount point is filled in "
     "place; the folder's permissions and owner are kept."),
    ("string", "task_name", None,
     "--model_type=classifier: a built-in run_classifier task, which fixes the labels, or "
     "multilabel (default: the task the training run left in classifier_task.json and "
     "label_list.txt beside --init_checkpoint; any other name is free)."),
    ("string", "xnli_language", "zh", "Language of --task_name=xnli."),
    ("string", "labels_file", None,
     "--model_type=tagger or classifier: the label list, in output order (default: "
     "label_list.txt beside --init_checkpoint, as run_ner and run_classifier write it in "
     "their --output_dir; where that file is, the same labels in its order)."),
)

# The flags of one --model_type each (a tagger's, a squad model's, the encoder's), and how
# every request is served.
MODEL_TYPE_FLAGS = (
    ("bool", "feature_based", False, "--model_type=tagger: a run_ner --feature_based model "
     "(give its --layers and --lstm_units too)."),
    ("string", "layers", "-1,-2,-3,-4", "--feature_based: run_ner's --layers; "
     "--model_type=encoder: the layers of sentence_embedding."),
    ("integer", "lstm_units", 768, "--feature_based: run_ner's --lstm_units."),
    ("bool", "crf", False,
     "--model_type=tagger: a run_ner --crf model: word_tags are the Viterbi tags of its CRF "
     "(default: the model folder's model_settings.json; a folder without the key: softmax)."),
    ("enum", "crf_tag_scheme", "auto",
     "--crf: run_ner's --crf_tag_scheme, the tag sequences Viterbi never decodes (iob2: I-X "
     "only after B-X or I-X, never first). auto: the model folder's model_settings.json (a "
     "folder without the key: none).", heads.TAG_SCHEMES),
    ("integer", "max_query_length", 64,
     "--model_type=squad: questions are cut to this many tokens (default: the model "
     "folder's, as run_squad trained it; else 64)."),
    ("integer", "max_answer_length", 30, "--model_type=squad: longest answer, in tokens."),
    ("integer", "n_best_size", 20,
     "--model_type=squad: how many best start and end positions per window the answer is "
     "chosen from (run_squad's --n_best_size)."),
    ("bool", "version_2_with_negative", False,
     "--model_type=squad: SQuAD 2.0 answers: \"\" when the null score minus the best span's "
     "is above --null_score_diff_threshold (default: the model folder's, as run_squad "
     "trained it)."),
    ("float", "null_score_diff_threshold", 0.0,
     "--model_type=squad --version_2_with_negative: run_squad's threshold of the null "
     "answer."),
    ("bool", "trim_padding", None,
     "Pack each request to its longest row, rounded up to a multiple of 16 (as the runners' "
     "evaluation batches), instead of --max_seq_length: the same outputs with less work. "
     "Default: on for --model_type=classifier, tagger and multiple_choice, off for squad "
     "(--trim_padding there: start/end logits [B, bucket] and answers ranking real positions "
     "only, as run_squad --trim_padding). --notrim_padding: every request at "
     "--max_seq_length. The encoder's serving_default always runs at --max_seq_length, its "
     "embed always trimmed."),
    ("enum", "serving_dtype", "fp32",
     "Precision the served model computes in. fp32 (default): the checkpoint's float32 "
     "numbers, as the command-line tools give them. bf16 / fp16: Keras mixed precision, as "
     "the runners' --dtype: matmuls and the layers around them run in bf16 / fp16 (the "
     "dense layers' weights stored converted, the values those matmuls use), LayerNorm, "
     "softmax and every output in float32; faster where the hardware has bf16 / fp16 units (CPUs with AMX or "
     "avx512_bf16, GPUs, TPUs), outputs close to fp32's but not equal (README: Serve it). "
     "Input and output signatures are the same.", SERVING_POLICIES),
    ("integer", "fill_mask_top_k", 5,
     "--model_type=masked_lm: the answers per [MASK] (top-k tokens, their ids and "
     "probabilities; docs/fill-mask.md), as extract_features.py --fill_mask_top_k."),
    ("integer", "embed_batch_size", 32,
     "--model_type=encoder: the embed signature sorts a request's texts by length and runs "
     "them this many at a time, each batch at its longest text (sentence vectors in the "
     "request's order)."),
)
