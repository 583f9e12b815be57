"""The HF transformers + torch side of bench_finetuning.py (run in the peer venv).

Usage (bench_finetuning.py starts it through bench_util.PeerProcess):
  .venv-reproduce/bin/python benchmarks/peer_finetuning.py SPEC.json

SPEC.json: {"model_dir": HF directory or null (then "config": a BertConfig dict, random
weights), "tokenizer_dir": an HF directory with vocab.txt (for the collator's padding)}.
The peer stays up and answers one JSON command per stdin line with one stdout line
prefixed "@@ " (peer_protocol.py), so that bench_finetuning times each row's peer job
right after its own side of the row (this host's speed drifts by up to 30% from minute to
minute: the two sides of a row timed minutes apart made its ratio swing):
  {"op": "info"}              -> torch / transformers versions, threads, device
  {"op": "job", "job": JOB}   -> {"seconds": timed seconds, "count": examples timed}
  {"op": "quit"}
Every job gives the token ids our side made (real tokens only, no padding), so both
sides run the same inputs:
  {"kind": "train", "num_labels": 2, "examples": [{"input_ids", "token_type_ids",
   "labels"}...], "batches": [[index, ...], ...], "warmup": W}
      BertForSequenceClassification in train mode (dropout on), torch AdamW, clip to
      norm 1.0, one step per batch; the first W batches are not timed; with
      "autocast": "bf16" the forward pass runs under torch.autocast("cpu", bfloat16);
  {"kind": "eval", "num_labels": 2, "examples": [...], "batch_size": B}
      the same model, eval mode, no_grad, softmax probabilities to numpy;
  {"kind": "extract", "examples": [...], "batch_size": B, "layers": [-1, -2, ...]}
      BertModel with hidden states, the chosen layers' real-token rows to numpy;
  {"kind": "squad", "examples": [...], "batch_size": B, "max_length": L or absent}
      BertForQuestionAnswering, start and end logits to numpy (with max_length, every
      batch padded to it, as HF's run_qa does by default).
Batches are padded to their longest example by transformers' DataCollatorWithPadding
(the usual recipe); forward jobs time the median of 3 passes after an untimed one over
their first "warmup_batches" batches (absent: a whole pass). The result per job:
{"seconds": timed seconds, "count": examples timed}.
"""
import json
import sys
import time

import torch
import transformers

import peer_protocol


# The GPU when torch sees one (a GPU user's comparison), else the CPU.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _model(spec, cls, **kwargs):
    """`cls` from spec's HF directory, or randomly initialised from its config, on DEVICE."""
    if spec.get("model_dir"):
        return cls.from_pretrained(spec["model_dir"], **kwargs).to(DEVICE)
    config = transformers.BertConfig(**spec["config"], **kwargs)
    return cls(config).to(DEVICE)


def _on_device(batch):
    return {k: v.to(DEVICE) for k, v in batch.items()}


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _collator(tokenizer_dir, max_length=None):
    """transformers' DataCollatorWithPadding with the model's own BERT tokenizer.

    max_length: pad every batch to it (HF run_qa's default, --pad_to_max_length).
    """
    tokenizer = transformers.BertTokenizerFast.from_pretrained(tokenizer_dir)
    if max_length:
        return transformers.DataCollatorWithPadding(tokenizer, padding="max_length",
                                                    max_length=max_length,
                                                    return_tensors="pt")
    return transformers.DataCollatorWithPadding(tokenizer, return_tensors="pt")


def _inputs(examples, indexes, with_labels):
    rows = []
    for i in indexes:
        e = examples[i]
        row = {"input_ids": e["input_ids"], "token_type_ids": e["token_type_ids"],
               "attention_mask": [1] * len(e["input_ids"])}
        if with_labels:
            row["labels"] = e["labels"]
        rows.append(row)
    return rows


def _batches(n, size):
    return [list(range(i, min(i + size, n))) for i in range(0, n, size)]


def train_step(model, optimizer, batch, bf16=False):
    """One fine-tuning step on `batch` (with labels): loss (the forward pass under
    torch.autocast bf16 when bf16), backward, clip to norm 1.0, AdamW, gradients cleared;
    returns the loss."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss)


def run_train(spec, job, collate):
    """Times the peer's fine-tuning steps of one job; returns its counts and seconds."""
    model = _model(spec, transformers.BertForSequenceClassification,
                   num_labels=job["num_labels"])
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    examples, batches = job["examples"], job["batches"]

    def step(indexes):
        return train_step(model, optimizer,
                          _on_device(collate(_inputs(examples, indexes, True))),
                          bf16=job.get("autocast") == "bf16")

    for indexes in batches[:job["warmup"]]:
        step(indexes)
    timed = batches[job["warmup"]:]
    start = time.perf_counter()
    for indexes in timed:
        step(indexes)
    _sync()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "count": sum(len(b) for b in timed)}


def _timed_passes(one_pass, batches, warmup_batches, repeats=3):
    """The median seconds of `repeats` timed passes over `batches` after an untimed one
    over the first `warmup_batches` of them (None: all)."""
    one_pass(batches[:warmup_batches] if warmup_batches else batches)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        one_pass(batches)
        _sync()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def run_forward(spec, job, collate):
    """Times the peer's forward passes (eval, SQuAD or encoder) of one job."""
    kind, examples = job["kind"], job["examples"]
    if kind == "eval":
        model = _model(spec, transformers.BertForSequenceClassification,
                       num_labels=job["num_labels"])
    elif kind == "squad":
        model = _model(spec, transformers.BertForQuestionAnswering)
    else:
        model = _model(spec, transformers.BertModel, add_pooling_layer=False)
    model.eval()
    batches = _batches(len(examples), job["batch_size"])

    def one_pass(part):
        outputs = []
        with torch.no_grad():
            for indexes in part:
                batch = _on_device(collate(_inputs(examples, indexes, False)))
                if kind == "eval":
                    logits = model(**batch).logits
                    outputs.append(torch.softmax(logits, -1).cpu().numpy())
                elif kind == "squad":
                    out = model(**batch)
                    outputs.append((out.start_logits.cpu().numpy(), out.end_logits.cpu().numpy()))
                else:
                    hidden = model(**batch, output_hidden_states=True).hidden_states
                    lengths = batch["attention_mask"].sum(1).tolist()
                    chosen = [hidden[i].cpu().numpy() for i in job["layers"]]
                    for row, length in enumerate(lengths):
                        outputs.append([h[row, :length] for h in chosen])
        return outputs

    return {"seconds": _timed_passes(one_pass, batches, job.get("warmup_batches")),
            "count": len(examples)}


def main(argv):
    """Serves the commands of the module docstring for the spec file argv[1]."""
    with open(argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    torch.manual_seed(0)

    def run_job(command):
        job = command["job"]
        run = run_train if job["kind"] == "train" else run_forward
        return run(spec, job, _collator(spec["tokenizer_dir"], job.get("max_length")))
    peer_protocol.serve(lambda: {"torch": torch.__version__,
                                 "transformers": transformers.__version__,
                                 "threads": torch.get_num_threads(), "device": DEVICE},
                        run_job)


if __name__ == "__main__":
    main(sys.argv)
