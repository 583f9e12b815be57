"""The peer side: the same fine-tuning with HuggingFace transformers + PyTorch.

Runs in the separate venv .venv-reproduce (torch 2.13.0 CPU + transformers). The model
(config.json + model.safetensors of all-MiniLM-L6-v2) is loaded with
BertForSequenceClassification / BertForQuestionAnswering; the task head is initialised
randomly under torch.manual_seed(seed). Inputs are built token for token like
run_classifier.py / run_squad.py build theirs (WordPiece from BertTokenizer with the
package's vocab.txt, [CLS] a [SEP] b [SEP], longest-first pair truncation), so both sides
see the same ids. Gradient clipping to global norm 1.0, weight decay 0.01 except on biases
and LayerNorm, eps 1e-6, then one of two optimisers:

  --optimizer=reference (default): the reference BERT's update rule written here for torch
    (Adam moments without bias correction, decoupled weight decay added to the update,
    linear warmup from 0 then lr * (1 - step / T)), and the task head drawn from a normal
    truncated at 2 std like the reference's. The same hyper-parameters as ours, optimiser
    included: the like-for-like comparison.
  --optimizer=hf: HuggingFace's usual recipe, torch.optim.AdamW (bias-corrected) with
    get_linear_schedule_with_warmup, the head as transformers initialises it.

  .venv-reproduce/bin/python benchmarks/reproduce/peer.py glue --task=mrpc \
      --data_dir=/tmp/x/MRPC --model_dir=... --seed=1 --output=/tmp/x/peer.json
  .venv-reproduce/bin/python benchmarks/reproduce/peer.py ner --data_dir=/tmp/x/conll \
      --model_dir=... --seed=1 --output=/tmp/x/peer.json
  .venv-reproduce/bin/python benchmarks/reproduce/peer.py squad --train_file=... \
      --predict_file=... --model_dir=... --seed=1 --output=/tmp/x/peer.json
"""
import collections
import itertools
import json
import os
import random
import sys
import time

# OpenMP threads that yield instead of spinning while they wait: on a shared, oversubscribed
# CPU, spinning threads of torch's OpenMP pool slow training down several times (TF's own
# thread pool already blocks). Set before torch (and its OpenMP runtime) is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # pylint: disable=wrong-import-position
import torch  # pylint: disable=wrong-import-position

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=wrong-import-position


def _seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class ReferenceAdam(torch.optim.Optimizer):
    """The reference BERT's AdamWeightDecay update for torch parameters.

    Per step, with g the (clipped) gradient: m <- b1 m + (1 - b1) g,
    v <- b2 v + (1 - b2) g^2, p <- p - lr (m / (sqrt(v) + eps) + wd p). No bias correction
    of m and v (the reference has none); wd is 0 for the no-decay group.
    """

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):  # pylint: disable=arguments-differ
        """One update: the reference's Adam without bias correction, decoupled decay."""
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["m"] = torch.zeros_like(param)
                    state["v"] = torch.zeros_like(param)
                m, v = state["m"], state["v"]
                m.mul_(beta1).add_(param.grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(param.grad, param.grad, value=1.0 - beta2)
                update = m / (v.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(param, alpha=group["weight_decay"])
                param.add_(update, alpha=-group["lr"])


def reference_lr_factor(step, num_steps, num_warmup):
    """Fraction of the peak rate at 0-based `step`, as the reference schedules it: linear
    warmup from 0 (when there is any), otherwise polynomial decay of power 1 to 0 at T."""
    if num_warmup and step < num_warmup:
        return step / float(num_warmup)
    return max(0.0, 1.0 - min(step, num_steps) / float(num_steps))


def _optimizer(model, learning_rate, num_steps, num_warmup, kind):
    """(optimizer, LambdaLR schedule) of `kind` ("reference" or "hf"), both with the
    reference's weight-decay exclusions."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if name.endswith("bias") or "LayerNorm" in name:
            no_decay.append(param)
        else:
            decay.append(param)
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    if kind == "reference":
        optimizer = ReferenceAdam(groups, lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: reference_lr_factor(step, num_steps, num_warmup))
        return optimizer, scheduler
    from transformers import get_linear_schedule_with_warmup  # pylint: disable=import-outside-toplevel
    optimizer = torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)
    return optimizer, get_linear_schedule_with_warmup(optimizer, num_warmup, num_steps)


def _init_head(module, kind):
    """Re-draws a task head's weights the reference's way (normal truncated at 2 std,
    std 0.02; biases 0) when `kind` is "reference"; leaves transformers' draw otherwise."""
    if kind != "reference":
        return
    with torch.no_grad():
        torch.nn.init.trunc_normal_(module.weight, std=0.02, a=-0.04, b=0.04)
        module.bias.zero_()


def _batch_order(num_examples, batch_size, num_steps, seed, order="permutation"):
    """Indexes of each training batch, batches taken across pass boundaries.

    order "permutation": one seeded permutation per pass over the data.
    order "buffer": what the reference's input pipeline (`repeat()` then `shuffle(100)` on
      the records in file order) does: the file order repeated, streamed through a buffer
      of 100 from which each next example is drawn uniformly and replaced by the next one
      in the stream (tf.data's shuffle algorithm, with numpy's generator).
    """
    rng = np.random.RandomState(seed)
    total = num_steps * batch_size
    stream = []
    if order == "permutation":
        while len(stream) < total:
            stream.extend(rng.permutation(num_examples).tolist())
    else:
        source = itertools.cycle(range(num_examples))
        buffer = [next(source) for _ in range(100)]
        while len(stream) < total:
            pick = rng.randint(len(buffer))
            stream.append(buffer[pick])
            buffer[pick] = next(source)
    return [stream[i * batch_size:(i + 1) * batch_size] for i in range(num_steps)]


def _fine_tune(model, head, tensors, num_examples, hp, args, describe=None):
    """Initialises `head`, then trains `model` for the epochs of `hp` (its batch size,
    learning rate and warmup proportion) over `num_examples`; describe(steps, warmup),
    when given, is the line logged before. Returns (steps, warmup, seconds, last loss)."""
    _init_head(head, args.optimizer)
    steps = common.num_train_steps(num_examples, hp["train_batch_size"], hp["num_train_epochs"])
    warmup = common.num_warmup_steps(steps, hp["warmup_proportion"])
    if describe:
        common.log(describe(steps, warmup))
    train_s, last_loss = _train(model, tensors, hp["train_batch_size"], steps, warmup,
                                hp["learning_rate"], args.seed, args.optimizer, args.data_order)
    return steps, warmup, train_s, last_loss


def _train(model, tensors, batch_size, num_steps, num_warmup, learning_rate, seed, kind,
           order):
    """Runs num_steps optimizer steps; returns (seconds, last loss)."""
    optimizer, scheduler = _optimizer(model, learning_rate, num_steps, num_warmup, kind)
    n = next(iter(tensors.values())).shape[0]
    model.train()
    start = time.time()
    loss_value = float("nan")
    for step, index in enumerate(_batch_order(n, batch_size, num_steps, seed, order)):
        idx = torch.tensor(index, dtype=torch.long)
        batch = {k: v[idx] for k, v in tensors.items()}
        loss = model(**batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        loss_value = float(loss.detach())
        if (step + 1) % 10 == 0 or step + 1 == num_steps:
            common.log("peer step %d/%d loss %.4f lr %.3g (%.1f examples/s)" % (
                step + 1, num_steps, loss_value, scheduler.get_last_lr()[0],
                (step + 1) * batch_size / (time.time() - start)))
    return time.time() - start, loss_value


# ---------------------------------------------------------------------------
# Inputs, built as the reference builds them
# ---------------------------------------------------------------------------

def _truncate_pair(tokens_a, tokens_b, max_length):
    """Drops one token at a time from the end of the longer list (of b on a tie)."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _encode_pair(tokenizer, text_a, text_b, max_seq_length):
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b is not None else []
    if text_b is not None:
        _truncate_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segments = [0] * len(tokens)
    if text_b is not None:
        tokens += tokens_b + ["[SEP]"]
        segments += [1] * (len(tokens_b) + 1)
    ids = tokenizer.convert_tokens_to_ids(tokens)
    pad = max_seq_length - len(ids)
    return ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad


def _glue_tensors(task, tokenizer, examples):
    ids, mask, segs, labels = [], [], [], []
    for text_a, text_b, label in examples:
        i, m, s = _encode_pair(tokenizer, text_a, text_b, task.max_seq_length)
        ids.append(i)
        mask.append(m)
        segs.append(s)
        labels.append(float(label) if task.labels is None else task.labels.index(label))
    tensors = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask),
               "token_type_ids": torch.tensor(segs)}
    label_dtype = torch.float32 if task.labels is None else torch.long
    tensors["labels"] = torch.tensor(labels, dtype=label_dtype)
    return tensors


def _tokenizer(model_dir):
    from transformers import BertTokenizer  # pylint: disable=import-outside-toplevel
    # from_pretrained: in transformers 5, BertTokenizer(vocab_file=...) does not load the
    # file (every token becomes [UNK]); the model directory's tokenizer files do.
    tokenizer = BertTokenizer.from_pretrained(model_dir, do_lower_case=True)
    if tokenizer.convert_tokens_to_ids(["hello"]) != [7592]:
        raise RuntimeError("tokenizer of %s did not load its vocabulary" % model_dir)
    return tokenizer


# ---------------------------------------------------------------------------
# GLUE
# ---------------------------------------------------------------------------

def run_glue(args):
    """The peer's GLUE fine-tuning and evaluation of one task and seed."""
    from transformers import BertForSequenceClassification  # pylint: disable=import-outside-toplevel
    task = common.TASKS[args.task]
    hp = common.GLUE_HPARAMS
    wall_start = time.time()
    _seed_everything(args.seed)
    tokenizer = _tokenizer(args.model_dir)
    train = common.read_glue_examples(task, args.data_dir, "train")
    dev = common.read_glue_examples(task, args.data_dir, "dev")
    train_t = _glue_tensors(task, tokenizer, train)
    dev_t = _glue_tensors(task, tokenizer, dev)
    num_labels = 1 if task.labels is None else len(task.labels)
    model = BertForSequenceClassification.from_pretrained(
        args.model_dir, num_labels=num_labels,
        problem_type="regression" if task.labels is None else "single_label_classification",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, classifier_dropout=0.1)
    steps, warmup, train_s, last_loss = _fine_tune(
        model, model.classifier, train_t, len(train), hp, args,
        lambda steps, warmup: "peer %s seed %d: %d train / %d dev examples, %d steps (%d "
        "warmup)" % (task.name, args.seed, len(train), len(dev), steps, warmup))

    model.eval()
    eval_start = time.time()
    outputs = []
    with torch.no_grad():
        n = dev_t["input_ids"].shape[0]
        for lo in range(0, n, hp["eval_batch_size"]):
            batch = {k: v[lo:lo + hp["eval_batch_size"]] for k, v in dev_t.items()
                     if k != "labels"}
            outputs.append(model(**batch).logits.float().numpy())
    eval_s = time.time() - eval_start
    outputs = np.concatenate(outputs)
    metrics = common.glue_metrics(task, dev_t["labels"].numpy(), outputs)
    result = {"side": _side(args), "optimizer": args.optimizer,
              "data_order": args.data_order, "task": task.key,
              "seed": args.seed, "metrics": metrics,
              "num_train_examples": len(train), "num_eval_examples": len(dev),
              "num_train_steps": steps, "num_warmup_steps": warmup,
              "train_seconds": train_s, "eval_seconds": eval_s,
              "train_examples_per_second": steps * hp["train_batch_size"] / train_s,
              "eval_examples_per_second": len(dev) / eval_s,
              "final_train_loss": last_loss, "wall_seconds": time.time() - wall_start}
    common.write_result(args.output, result)


# ---------------------------------------------------------------------------
# SQuAD 1.1
# ---------------------------------------------------------------------------

def _is_whitespace(c):
    return c in " \t\r\n" or ord(c) == 0x202F


def _squad_examples(path, is_training):
    """Questions with their paragraph split on whitespace into words (the reference's
    doc_tokens), plus the answer's word span for training."""
    with open(path, "r", encoding="utf-8") as f:
        data = json.load(f)["data"]
    examples = []
    for article in data:
        for paragraph in article["paragraphs"]:
            text = paragraph["context"]
            words, char_to_word, in_space = [], [], True
            for c in text:
                if _is_whitespace(c):
                    in_space = True
                else:
                    if in_space:
                        words.append(c)
                    else:
                        words[-1] += c
                    in_space = False
                char_to_word.append(len(words) - 1)
            for qa in paragraph["qas"]:
                ex = {"id": qa["id"], "question": qa["question"], "words": words}
                if is_training:
                    answer = qa["answers"][0]
                    start_char = answer["answer_start"]
                    ex["start_word"] = char_to_word[start_char]
                    ex["end_word"] = char_to_word[start_char + len(answer["text"]) - 1]
                    ex["answer_text"] = answer["text"]
                    # Answers whose text cannot be found in the words are skipped.
                    span = " ".join(words[ex["start_word"]:ex["end_word"] + 1])
                    if " ".join(answer["text"].strip().split()) not in span:
                        continue
                examples.append(ex)
    return examples


def _tighten_span(sub_tokens, lo, hi, tokenizer, answer_text):
    """The smallest sub-token span [lo, hi] whose text equals the tokenized answer."""
    target = " ".join(tokenizer.tokenize(answer_text))
    for s in range(lo, hi + 1):
        for e in range(hi, s - 1, -1):
            if " ".join(sub_tokens[s:e + 1]) == target:
                return s, e
    return lo, hi


def _squad_features(examples, tokenizer, is_training):
    """Windows of max_seq_length over each paragraph, doc_stride apart."""
    cfg = common.SQUAD
    max_len, stride = cfg["max_seq_length"], cfg["doc_stride"]
    features = []
    for ex_index, ex in enumerate(examples):
        query = tokenizer.tokenize(ex["question"])[:cfg["max_query_length"]]
        sub_to_word, word_to_sub, subs = [], [], []
        for w, word in enumerate(ex["words"]):
            word_to_sub.append(len(subs))
            for piece in tokenizer.tokenize(word):
                sub_to_word.append(w)
                subs.append(piece)
        if is_training:
            lo = word_to_sub[ex["start_word"]]
            hi = (word_to_sub[ex["end_word"] + 1] - 1 if ex["end_word"] + 1 < len(ex["words"])
                  else len(subs) - 1)
            lo, hi = _tighten_span(subs, lo, hi, tokenizer, ex["answer_text"])
        room = max_len - len(query) - 3
        windows, start = [], 0
        while start < len(subs):
            length = min(room, len(subs) - start)
            windows.append((start, length))
            if start + length == len(subs):
                break
            start += min(length, stride)
        for w_index, (w_start, w_len) in enumerate(windows):
            tokens = ["[CLS]"] + query + ["[SEP]"]
            segments = [0] * len(tokens)
            token_to_word, max_context = {}, {}
            for i in range(w_len):
                pos = w_start + i
                token_to_word[len(tokens)] = sub_to_word[pos]
                max_context[len(tokens)] = _has_max_context(windows, w_index, pos)
                tokens.append(subs[pos])
                segments.append(1)
            tokens.append("[SEP]")
            segments.append(1)
            ids = tokenizer.convert_tokens_to_ids(tokens)
            pad = max_len - len(ids)
            feature = {"example_index": ex_index, "tokens": tokens,
                       "token_to_word": token_to_word, "max_context": max_context,
                       "input_ids": ids + [0] * pad, "attention_mask": [1] * len(ids) + [0] * pad,
                       "token_type_ids": segments + [0] * pad}
            if is_training:
                if lo >= w_start and hi <= w_start + w_len - 1:
                    offset = len(query) + 2
                    feature["start_positions"] = lo - w_start + offset
                    feature["end_positions"] = hi - w_start + offset
                else:
                    feature["start_positions"] = feature["end_positions"] = 0
            features.append(feature)
    return features


def _has_max_context(windows, w_index, pos):
    """True when window w_index gives token `pos` the most context of all windows
    (min of left and right context, plus 0.01 * window length; ties to the first)."""
    best, best_index = None, None
    for i, (start, length) in enumerate(windows):
        end = start + length - 1
        if pos < start or pos > end:
            continue
        score = min(pos - start, end - pos) + 0.01 * length
        if best is None or score > best:
            best, best_index = score, i
    return best_index == w_index


def _basic_tokenizer(tokenizer):
    """text -> words, lower-cased, accents stripped, punctuation split off: the
    normalizer and pre-tokenizer of the fast tokenizer (BERT's basic tokenization)."""
    backend = tokenizer.backend_tokenizer

    def basic(text):
        normalized = backend.normalizer.normalize_str(text)
        return [word for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
    return basic


def _final_text(pred_text, orig_text):
    """Maps the de-tokenized prediction back onto the original words' characters
    (so case and punctuation come from the paragraph, as in the reference)."""
    def strip_spaces(text):
        chars, mapping = [], {}
        for i, c in enumerate(text):
            if c == " ":
                continue
            mapping[len(chars)] = i
            chars.append(c)
        return "".join(chars), mapping

    tok_text = " ".join(_final_text.basic(orig_text))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns, orig_map = strip_spaces(orig_text)
    tok_ns, tok_map = strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        return orig_text
    inverse = {v: k for k, v in tok_map.items()}
    if start not in inverse or end not in inverse:
        return orig_text
    o_start = orig_map.get(inverse[start])
    o_end = orig_map.get(inverse[end])
    if o_start is None or o_end is None:
        return orig_text
    return orig_text[o_start:o_end + 1]


def _predictions(examples, features, start_logits, end_logits):
    """Best answer text per question id (n-best over windows, max_answer_length)."""
    cfg = common.SQUAD
    by_example = collections.defaultdict(list)
    for f_index, feature in enumerate(features):
        by_example[feature["example_index"]].append(f_index)
    answers = {}
    for ex_index, ex in enumerate(examples):
        candidates = []
        for f_index in by_example[ex_index]:
            feature = features[f_index]
            s_logits, e_logits = start_logits[f_index], end_logits[f_index]
            top_s = np.argsort(-s_logits, kind="stable")[:cfg["n_best_size"]]
            top_e = np.argsort(-e_logits, kind="stable")[:cfg["n_best_size"]]
            for s in top_s:
                for e in top_e:
                    s, e = int(s), int(e)
                    if s not in feature["token_to_word"] or e not in feature["token_to_word"]:
                        continue
                    if not feature["max_context"].get(s, False):
                        continue
                    if e < s or e - s + 1 > cfg["max_answer_length"]:
                        continue
                    candidates.append((s_logits[s] + e_logits[e], f_index, s, e))
        candidates.sort(key=lambda c: -c[0])
        text = ""
        for _, f_index, s, e in candidates[:cfg["n_best_size"]]:
            feature = features[f_index]
            pieces = " ".join(feature["tokens"][s:e + 1]).replace(" ##", "").replace("##", "")
            pieces = " ".join(pieces.strip().split())
            w_lo, w_hi = feature["token_to_word"][s], feature["token_to_word"][e]
            orig = " ".join(ex["words"][w_lo:w_hi + 1])
            text = _final_text(pieces, orig)
            break
        answers[ex["id"]] = text
    return answers


def run_squad(args):
    """The peer's SQuAD fine-tuning and prediction, scored as the reference scores."""
    from transformers import BertForQuestionAnswering  # pylint: disable=import-outside-toplevel
    cfg = common.SQUAD
    wall_start = time.time()
    _seed_everything(args.seed)
    tokenizer = _tokenizer(args.model_dir)
    _final_text.basic = _basic_tokenizer(tokenizer)
    train_ex = _squad_examples(args.train_file, True)
    # The reference shuffles the training examples (fixed seed) before writing features.
    random.Random(12345).shuffle(train_ex)
    eval_ex = _squad_examples(args.predict_file, False)
    train_f = _squad_features(train_ex, tokenizer, True)
    eval_f = _squad_features(eval_ex, tokenizer, False)
    keys = ("input_ids", "attention_mask", "token_type_ids")
    train_t = {k: torch.tensor([f[k] for f in train_f]) for k in keys + (
        "start_positions", "end_positions")}
    eval_t = {k: torch.tensor([f[k] for f in eval_f]) for k in keys}
    model = BertForQuestionAnswering.from_pretrained(
        args.model_dir, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    steps, warmup, train_s, last_loss = _fine_tune(
        model, model.qa_outputs, train_t, len(train_ex), cfg, args,
        lambda steps, warmup: "peer squad seed %d: %d train questions (%d windows), %d eval "
        "questions (%d windows), %d steps (%d warmup)" % (
            args.seed, len(train_ex), len(train_f), len(eval_ex), len(eval_f), steps, warmup))
    model.eval()
    eval_start = time.time()
    starts, ends = [], []
    with torch.no_grad():
        n = eval_t["input_ids"].shape[0]
        for lo in range(0, n, cfg["predict_batch_size"]):
            out = model(**{k: v[lo:lo + cfg["predict_batch_size"]] for k, v in eval_t.items()})
            starts.append(out.start_logits.float().numpy())
            ends.append(out.end_logits.float().numpy())
    answers = _predictions(eval_ex, eval_f, np.concatenate(starts), np.concatenate(ends))
    eval_s = time.time() - eval_start
    pred_path = os.path.splitext(args.output)[0] + ".predictions.json"
    with open(pred_path, "w", encoding="utf-8") as f:
        json.dump(answers, f)
    result = {"side": _side(args), "optimizer": args.optimizer,
              "data_order": args.data_order, "task": "squad",
              "seed": args.seed,
              "predictions_file": pred_path,
              "num_train_examples": len(train_ex), "num_train_features": len(train_f),
              "num_eval_examples": len(eval_ex), "num_eval_features": len(eval_f),
              "num_train_steps": steps, "num_warmup_steps": warmup,
              "train_seconds": train_s, "eval_seconds": eval_s,
              "train_examples_per_second": steps * cfg["train_batch_size"] / train_s,
              "eval_examples_per_second": len(eval_ex) / eval_s,  # questions/s
              "final_train_loss": last_loss, "wall_seconds": time.time() - wall_start}
    common.write_result(args.output, result)


# ---------------------------------------------------------------------------
# CoNLL-2003 NER (token tagging)
# ---------------------------------------------------------------------------

def _ner_tensors(tokenizer, sentences, labels, max_seq_length):
    """First-piece labels (-100 elsewhere), as run_ner.py labels its windows.

    Returns (tensors, per sentence the position of each word's first piece or None).
    Sentences of this subset fit in one window at CONLL["max_seq_length"] (checked).
    """
    ids, mask, tags, firsts = [], [], [], []
    for words, gold in sentences:
        pieces, label_row, first = ["[CLS]"], [-100], []
        for word, tag in zip(words, gold):
            word_pieces = tokenizer.tokenize(word)
            first.append(len(pieces) if word_pieces else None)
            pieces += word_pieces
            label_row += [labels.index(tag)] + [-100] * (len(word_pieces) - 1) \
                if word_pieces else []
        if len(pieces) + 1 > max_seq_length:
            raise ValueError("a sentence of %d pieces does not fit" % len(pieces))
        pieces.append("[SEP]")
        label_row.append(-100)
        pad = max_seq_length - len(pieces)
        ids.append(tokenizer.convert_tokens_to_ids(pieces) + [0] * pad)
        mask.append([1] * len(pieces) + [0] * pad)
        tags.append(label_row + [-100] * pad)
        firsts.append(first)
    tensors = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask),
               "token_type_ids": torch.zeros(len(ids), max_seq_length, dtype=torch.long),
               "labels": torch.tensor(tags)}
    return tensors, firsts


def run_ner(args):
    """BertForTokenClassification on the CoNLL subset; writes the predicted tags."""
    from transformers import BertForTokenClassification  # pylint: disable=import-outside-toplevel
    cfg = common.CONLL
    wall_start = time.time()
    _seed_everything(args.seed)
    tokenizer = _tokenizer(args.model_dir)
    train = common.read_conll(os.path.join(args.data_dir, "train.txt"))
    dev = common.read_conll(os.path.join(args.data_dir, "dev.txt"))
    labels = common.conll_labels(train)
    train_t, _ = _ner_tensors(tokenizer, train, labels, cfg["max_seq_length"])
    dev_t, dev_firsts = _ner_tensors(tokenizer, dev, labels, cfg["max_seq_length"])
    model = BertForTokenClassification.from_pretrained(
        args.model_dir, num_labels=len(labels), hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, classifier_dropout=0.1)
    steps, _, train_s, last_loss = _fine_tune(model, model.classifier, train_t, len(train),
                                              cfg, args)
    model.eval()
    eval_start = time.time()
    predicted = []
    with torch.no_grad():
        inputs = {k: v for k, v in dev_t.items() if k != "labels"}
        for lo in range(0, len(dev), cfg["eval_batch_size"]):
            out = model(**{k: v[lo:lo + cfg["eval_batch_size"]] for k, v in inputs.items()})
            predicted.extend(out.logits.argmax(-1).numpy().tolist())
    tags = [[labels[row[p]] if p is not None else "O" for p in first]
            for row, first in zip(predicted, dev_firsts)]
    eval_s = time.time() - eval_start
    result = {"side": _side(args), "optimizer": args.optimizer, "task": "conll",
              "seed": args.seed, "tags": tags, "num_train_sentences": len(train),
              "num_train_steps": steps, "train_seconds": train_s, "eval_seconds": eval_s,
              "train_examples_per_second": steps * cfg["train_batch_size"] / train_s,
              "eval_examples_per_second": len(dev) / eval_s,
              "final_train_loss": last_loss, "wall_seconds": time.time() - wall_start}
    common.write_result(args.output, result)


def _side(args):
    """The name of this side in the results (run_all.py's --sides)."""
    if args.optimizer == "hf":
        return "peer_hf"
    return "peer_buffer" if args.data_order == "buffer" else "peer"


def main():
    """The peer's side of a reproduction run (glue or squad mode)."""
    parser = common.side_parser(__doc__.split("\n")[0],
                                "HF model directory (config.json, model.safetensors, vocab)")
    parser.add_argument("--data_order", choices=["permutation", "buffer"],
                        default="permutation",
                        help="permutation: one shuffled pass after another; buffer: the "
                             "reference pipeline's shuffle buffer of 100 over the file order")
    parser.add_argument("--optimizer", choices=["reference", "hf"], default="reference",
                        help="reference: the reference's Adam rule and schedule (like for "
                             "like); hf: torch AdamW + get_linear_schedule_with_warmup")
    args = parser.parse_args()
    torch.set_num_threads(common.NUM_THREADS)
    torch.set_num_interop_threads(1)
    if args.mode == "glue":
        run_glue(args)
    elif args.mode == "ner":
        run_ner(args)
    else:
        run_squad(args)


if __name__ == "__main__":
    main()
