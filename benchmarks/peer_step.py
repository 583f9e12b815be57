"""The torch side of `profile_step.py --what finetuning`: HF transformers' training steps on
the same batches (run in the peer venv).

  python benchmarks/peer_step.py MODEL_DIR BATCHES.json STEPS NUM_LABELS

BATCHES.json: a list of {"input_ids", "segment_ids", "input_mask", "label_ids"} as
profile_step.py built them (each padded to its bucket length); torch gets each cut to its
longest row, as DataCollatorWithPadding pads. The step is bench_finetuning's peer step
(peer_finetuning.train_step): BertForSequenceClassification in train mode, loss, backward,
clip to norm 1.0, AdamW, zero_grad. After one untimed pass over the batches (at least two
steps), STEPS steps cycling over them are timed; prints their mean ms on a line starting
"torch finetuning".
"""
import json
import sys
import time

import torch
import transformers

import peer_finetuning


def _cut(rows):
    """One batch of profile_step's as torch tensors, cut to its longest row."""
    length = max(sum(mask) for mask in rows["input_mask"])
    return {"input_ids": torch.tensor(rows["input_ids"])[:, :length],
            "token_type_ids": torch.tensor(rows["segment_ids"])[:, :length],
            "attention_mask": torch.tensor(rows["input_mask"])[:, :length],
            "labels": torch.tensor(rows["label_ids"])}


def main(argv):
    """Times the steps of the module docstring and prints the line."""
    model_dir, batch_path, steps, num_labels = argv[1], argv[2], int(argv[3]), int(argv[4])
    torch.set_num_threads(2)
    with open(batch_path, encoding="utf-8") as f:
        batches = [_cut(rows) for rows in json.load(f)]
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=num_labels)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)

    def step(batch):
        return peer_finetuning.train_step(model, optimizer, batch)

    for i in range(max(2, len(batches))):
        step(batches[i % len(batches)])
    start = time.perf_counter()
    for i in range(steps):
        step(batches[i % len(batches)])
    print("torch finetuning, the same %d batch(es) cut to their longest rows (%s positions): "
          "%.1f ms per step (wall, mean of %d)" % (
              len(batches), ", ".join(str(b["input_ids"].shape[1]) for b in batches[:3])
              + (", ..." if len(batches) > 3 else ""),
              (time.perf_counter() - start) * 1e3 / steps, steps))


if __name__ == "__main__":
    main(sys.argv)
