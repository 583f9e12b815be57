#!/usr/bin/env bash
# The `make demo` pipeline: every stage of BERT, end to end, on a tiny model and
# the bundled demo data, in a few minutes on a CPU. Every script runs but
# convert_tf1_checkpoint.py, which needs Google's downloaded weights.
#
#   1. create_vocab.py              learn a WordPiece vocabulary from demo/data/corpus.txt
#   2. bert_config.json             a 2-layer, 64-wide model
#   3. create_pretraining_data.py   masked-LM / next-sentence examples
#   4. run_pretraining.py           pre-train, then evaluate
#   5. run_classifier.py            fine-tune on demo/data/task (SST-2 layout)
#   6. run_squad.py                 fine-tune and predict on demo/data/squad.json
#   7. extract_features.py          contextual embeddings of two sentences
#   8. run_ner.py                   fine-tune a named-entity tagger on demo/data/ner (CoNLL layout)
#   9. run_multiple_choice.py       fine-tune a four-way multiple-choice model on demo/data/choice
#  10. export_saved_model.py        export the classifier as a SavedModel on raw text, then
#                                   load it in Python and classify two new sentences
#  11. convert_hf_checkpoint.py     write the classifier in HuggingFace's format (a folder
#      --direction=to_hf            transformers' pipeline() loads, in a torch environment)
#  12. convert_keras_hub.py         write the classifier as a keras-hub preset and classify two
#      --direction=to_keras_hub     sentences with keras_hub's BertTextClassifier.from_preset
#                                   (only when keras-hub, the [keras-hub] extra, is installed)
#
# Usage: PY=.venv/bin/python bash demo/run_demo.sh
# Environment: PY (python to use), DEMO_OUTPUT (default demo_output; wiped first),
#              DEMO_VERBOSE=1 to stream each command's log instead of keeping it in
#              $DEMO_OUTPUT/logs/.
# The numbers printed are those of a model trained for seconds on ~400 sentences:
# they show that every stage runs and learns something, nothing more.
set -Eeuo pipefail

cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${DEMO_OUTPUT:-demo_output}
DATA=demo/data
VERBOSE=${DEMO_VERBOSE:-0}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
export PYTHONUNBUFFERED=1

STEP=0
STEP_NAME="setup"
STEP_START=$SECONDS
DEMO_START=$SECONDS

on_error() {
    echo >&2
    echo "*** demo FAILED at step $STEP ($STEP_NAME); nothing after it was run." >&2
}
trap on_error ERR

step() {
    if [ "$STEP" -gt 0 ]; then
        echo "    (step $STEP took $((SECONDS - STEP_START)) s)"
    fi
    STEP=$1
    STEP_NAME=$2
    STEP_START=$SECONDS
    echo
    echo "=== [$STEP/12] $STEP_NAME"
}

# run LOG_NAME CMD...: runs one of our scripts, its log kept in $OUT/logs/LOG_NAME.log;
# on failure the end of the log is shown.
run() {
    local log="$OUT/logs/$1.log"
    shift
    echo "+ $*"
    if [ "$VERBOSE" = "1" ]; then
        "$@" 2>&1 | tee "$log"
        return "${PIPESTATUS[0]}"
    fi
    if ! "$@" >"$log" 2>&1; then
        echo "--- last lines of $log:" >&2
        tail -n 40 "$log" >&2
        return 1
    fi
}

show() {  # show FILE [MAX_LINES]
    if [ ! -f "$1" ]; then
        echo "missing output file: $1" >&2
        return 1
    fi
    echo "--- $1"
    head -n "${2:-20}" "$1"
}

case "$OUT" in
    / | . | .. | "$HOME") echo "refusing to wipe DEMO_OUTPUT=$OUT" >&2; exit 1 ;;
esac
rm -rf "$OUT"
mkdir -p "$OUT/logs"

step 1 "Learn a WordPiece vocabulary (create_vocab.py)"
run create_vocab "$PY" create_vocab.py \
    --input_file="$DATA/corpus.txt" \
    --output_file="$OUT/vocab.txt" \
    --vocab_size=1000 \
    --do_lower_case=True
# 1,000 pieces for the corpus's 1,047 distinct words: the learner keeps the frequent
# words whole and builds the rarer ones from pieces (## marks a piece inside a word),
# stopping below the limit when more pieces would not pay (663 here).
VOCAB_SIZE=$(wc -l <"$OUT/vocab.txt" | tr -d ' ')
echo "$OUT/vocab.txt: $VOCAB_SIZE tokens; whole words: $(grep -v '^\[\|^##' "$OUT/vocab.txt" | awk 'length > 4' | head -n 8 | tr '\n' ' ')"
echo "  pieces: $(grep '^##...' "$OUT/vocab.txt" | head -n 10 | tr '\n' ' ')"
echo "tokenized: $("$PY" -c 'import sys, tokenization as t; tok = t.FullTokenizer(sys.argv[1], True); print(" ".join(tok.tokenize(sys.argv[2])))' "$OUT/vocab.txt" "On Saturday the bakery's strawberries were wonderfully sweet.")"

step 2 "Write a tiny bert_config.json"
cat >"$OUT/bert_config.json" <<EOF
{
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 64,
  "initializer_range": 0.02,
  "intermediate_size": 128,
  "max_position_embeddings": 128,
  "num_attention_heads": 2,
  "num_hidden_layers": 2,
  "type_vocab_size": 2,
  "vocab_size": $VOCAB_SIZE
}
EOF
cat "$OUT/bert_config.json"
COMMON=(--vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json")

step 3 "Create pre-training examples (create_pretraining_data.py)"
run create_pretraining_data "$PY" create_pretraining_data.py \
    --input_file="$DATA/corpus.txt" \
    --output_file="$OUT/pretrain.tfrecord" \
    --vocab_file="$OUT/vocab.txt" \
    --do_lower_case=True \
    --max_seq_length=64 \
    --max_predictions_per_seq=10 \
    --masked_lm_prob=0.15 \
    --random_seed=12345 \
    --dupe_factor=5
grep -i -m1 "wrote" "$OUT/logs/create_pretraining_data.log" | sed 's/^.*\] //' || true
ls -l "$OUT/pretrain.tfrecord"

step 4 "Pre-train and evaluate (run_pretraining.py)"
run run_pretraining "$PY" run_pretraining.py \
    --input_file="$OUT/pretrain.tfrecord" \
    --output_dir="$OUT/pretraining" \
    --bert_config_file="$OUT/bert_config.json" \
    --do_train=True \
    --do_eval=True \
    --train_batch_size=16 \
    --eval_batch_size=16 \
    --max_seq_length=64 \
    --max_predictions_per_seq=10 \
    --num_train_steps=200 \
    --num_warmup_steps=20 \
    --learning_rate=1e-3 \
    --save_checkpoints_steps=100 \
    --iterations_per_loop=50 \
    --max_eval_steps=20 \
    --seed=12345
show "$OUT/pretraining/eval_results.txt"

step 5 "Fine-tune a sentence classifier (run_classifier.py, SST-2 layout)"
run run_classifier "$PY" run_classifier.py \
    "${COMMON[@]}" \
    --task_name=sst-2 \
    --data_dir="$DATA/task" \
    --init_checkpoint="$OUT/pretraining" \
    --output_dir="$OUT/classifier" \
    --do_lower_case=True \
    --do_train=True \
    --do_eval=True \
    --do_predict=True \
    --max_seq_length=64 \
    --train_batch_size=16 \
    --learning_rate=5e-4 \
    --num_train_epochs=20 \
    --save_checkpoints_steps=1000 \
    --seed=12345
show "$OUT/classifier/eval_results.txt"
show "$OUT/classifier/test_results.tsv" 3

step 6 "Fine-tune and predict on SQuAD v1.1 (run_squad.py)"
run run_squad "$PY" run_squad.py \
    "${COMMON[@]}" \
    --init_checkpoint="$OUT/pretraining" \
    --output_dir="$OUT/squad" \
    --do_lower_case=True \
    --do_train=True \
    --train_file="$DATA/squad.json" \
    --do_predict=True \
    --predict_file="$DATA/squad.json" \
    --max_seq_length=128 \
    --doc_stride=64 \
    --max_query_length=32 \
    --train_batch_size=8 \
    --predict_batch_size=8 \
    --learning_rate=1e-3 \
    --num_train_epochs=40 \
    --save_checkpoints_steps=1000 \
    --seed=12345
show "$OUT/squad/predictions.json" 8
if [ -f "$OUT/squad/eval_results.txt" ]; then
    echo "(scored on the same 42 questions it was trained on: a check that it learns)"
    show "$OUT/squad/eval_results.txt"
fi

step 7 "Extract contextual features (extract_features.py)"
cat >"$OUT/extract_input.txt" <<'EOF'
The train to the city was late again this morning.
Fresh bread cooled on the racks. ||| Customers queued outside the bakery.
EOF
run extract_features "$PY" extract_features.py \
    "${COMMON[@]}" \
    --input_file="$OUT/extract_input.txt" \
    --output_file="$OUT/features.jsonl" \
    --init_checkpoint="$OUT/pretraining" \
    --do_lower_case=True \
    --layers=-1,-2 \
    --max_seq_length=64 \
    --batch_size=8
if [ ! -s "$OUT/features.jsonl" ]; then
    echo "missing output file: $OUT/features.jsonl" >&2
    false
fi
echo "--- $OUT/features.jsonl: $(wc -l <"$OUT/features.jsonl" | tr -d ' ') lines; the first, cut to 400 characters:"
head -n 1 "$OUT/features.jsonl" | cut -c1-400
echo "..."

step 8 "Fine-tune a named-entity tagger (run_ner.py, CoNLL-2003 layout)"
run run_ner "$PY" run_ner.py \
    "${COMMON[@]}" \
    --data_dir="$DATA/ner" \
    --init_checkpoint="$OUT/pretraining" \
    --output_dir="$OUT/ner" \
    --do_lower_case=True \
    --do_train=True \
    --do_eval=True \
    --do_predict=True \
    --max_seq_length=64 \
    --train_batch_size=8 \
    --learning_rate=1e-3 \
    --num_train_epochs=30 \
    --save_checkpoints_steps=1000 \
    --seed=12345
show "$OUT/ner/eval_results.txt"
echo "(test_predictions.txt: each line of $DATA/ner/test.txt + the predicted tag, as conlleval reads it)"
show "$OUT/ner/test_predictions.txt" 12

step 9 "Fine-tune a multiple-choice model (run_multiple_choice.py, jsonl layout)"
echo "a question: $(head -n 1 "$DATA/choice/train.jsonl")"
run run_multiple_choice "$PY" run_multiple_choice.py \
    "${COMMON[@]}" \
    --task_name=jsonl \
    --data_dir="$DATA/choice" \
    --init_checkpoint="$OUT/pretraining" \
    --output_dir="$OUT/choice" \
    --do_lower_case=True \
    --do_train=True \
    --do_eval=True \
    --do_predict=True \
    --max_seq_length=32 \
    --train_batch_size=16 \
    --learning_rate=1e-3 \
    --num_train_epochs=10 \
    --save_checkpoints_steps=1000 \
    --seed=12345
show "$OUT/choice/eval_results.txt"
echo "(test_results.tsv: the probability of each ending, one question a line)"
show "$OUT/choice/test_results.tsv" 3

step 10 "Export the classifier and serve it (export_saved_model.py, then plain TensorFlow)"
run export_saved_model "$PY" export_saved_model.py \
    "${COMMON[@]}" \
    --model_type=classifier \
    --task_name=sst-2 \
    --init_checkpoint="$OUT/classifier" \
    --do_lower_case=True \
    --max_seq_length=64 \
    --export_dir="$OUT/saved_model"
echo "+ $PY (load $OUT/saved_model in Python, classify two new sentences)"
"$PY" - "$OUT/saved_model" <<'EOF'
import sys

from bert_tf2 import startup; startup.quiet()  # before tensorflow: no start-up noise
import tensorflow as tf

model = tf.saved_model.load(sys.argv[1])
# New sentences in the style of the ~400 it was trained on (short, plain ones are
# beyond a model trained for seconds).
texts = ["Honestly, the bread from the bakery was superb; it made my whole week.",
         "Honestly, the soup was cold and awful; I regret going at all."]
out = model.signatures["serving_text_a"](text_a=tf.constant(texts))
for text, probs, label in zip(texts, out["probabilities"].numpy(),
                              out["predicted_label"].numpy()):
    print("%-70s label %s  probabilities %s" % (text, label.decode(), probs.round(3)))
EOF

step 11 "The classifier for transformers (convert_hf_checkpoint.py --direction=to_hf)"
run convert_hf_checkpoint "$PY" convert_hf_checkpoint.py \
    --direction=to_hf \
    --init_checkpoint="$OUT/classifier" \
    --output_dir="$OUT/classifier_hf"
echo "$OUT/classifier_hf: $(ls "$OUT/classifier_hf" | grep -v bert_tf2_outputs | tr '\n' ' ')"
"$PY" -c 'import json, sys; c = json.load(open(sys.argv[1])); print("architectures %s, id2label %s" % (c["architectures"], c["id2label"]))' "$OUT/classifier_hf/config.json"
echo "in a torch environment: pipeline(\"text-classification\", model=\"$OUT/classifier_hf\")"

if "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("keras_hub") is None)'; then
    step 12 "The classifier for keras-hub (convert_keras_hub.py), loaded by keras_hub itself"
    run convert_keras_hub "$PY" convert_keras_hub.py \
        --direction=to_keras_hub \
        --init_checkpoint="$OUT/classifier" \
        --output_dir="$OUT/classifier_keras_hub"
    echo "+ $PY (keras_hub.models.BertTextClassifier.from_preset($OUT/classifier_keras_hub))"
    "$PY" - "$OUT/classifier_keras_hub" <<'EOF'
import sys

from bert_tf2 import startup; startup.quiet()  # before tensorflow: no start-up noise
import keras_hub

classifier = keras_hub.models.BertTextClassifier.from_preset(sys.argv[1])
labels = open(sys.argv[1] + "/label_list.txt", encoding="utf-8").read().split()
texts = ["Honestly, the bread from the bakery was superb; it made my whole week.",
         "Honestly, the soup was cold and awful; I regret going at all."]
for text, probs in zip(texts, classifier.predict(texts, verbose=0)):
    print("%-70s label %s  probabilities %s" % (text, labels[probs.argmax()], probs.round(3)))
EOF
else
    echo "(step 12, convert_keras_hub.py, skipped: keras-hub is not installed; pip install '.[keras-hub]')"
fi

echo "    (step $STEP took $((SECONDS - STEP_START)) s)"
echo
echo "=== demo finished in $((SECONDS - DEMO_START)) s; outputs in $OUT/ (logs in $OUT/logs/)"
