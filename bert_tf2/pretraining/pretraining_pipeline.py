"""create_pretraining_data's fast pipeline: token ids in, serialized records out.

generate_records runs the algorithm (pretraining_generator.Generator) on documents
of varint-encoded ids and encodes each example straight to its record bytes
(pretraining_records.ExampleEncoder); write_single_process is the default mode
(--num_workers=1: the reference's records, one for one); shard_worker_state and
shard_records are the per-file algorithm that both parallel modes run, the local
workers (pretraining_shards.write_sharded) and Apache Beam (pretraining_beam).
"""
import contextlib
import gc
import random

from absl import logging

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2.pretraining import pretraining_corpus
from bert_tf2.pretraining import pretraining_draws
from bert_tf2.pretraining import pretraining_generator
from bert_tf2.pretraining import pretraining_options
from bert_tf2.pretraining import pretraining_records
from bert_tf2.pretraining import pretraining_shards
from bert_tf2.pretraining import record_store


# True once freeze_for_process() ran: the objects of the process stay frozen.
_PROCESS_FROZEN = [False]


def freeze_for_process():
    """For a command line's process, which ends after its run: moves every object that
    exists now out of the garbage collector's sight for good (gc.freeze)."""
    gc.freeze()
    _PROCESS_FROZEN[0] = True


@contextlib.contextmanager
def collector_skips_existing_objects():
    """Within: the garbage collector leaves the objects that existed before alone.

    A run allocates millions of small objects (token lists, records), which triggers
    many collections, and each full one would walk TensorFlow's few hundred thousand
    objects again (a third of a 1 MB run's time). gc.freeze() moves those out of its
    sight for the run; they go back on exit, unless freeze_for_process() froze the
    process's objects for good (then they stay frozen). Objects a Python caller froze
    itself stay as they are (gc.get_freeze_count walks them: only asked then).
    """
    if not _PROCESS_FROZEN[0] and gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        if not _PROCESS_FROZEN[0]:
            gc.unfreeze()


def generate_records(documents, options, encoder, rng, progress=None, counter=None,
                     stats=None, store=None):
    """All examples of `documents` (shuffled), as serialized records; draws from `rng`.

    documents: as read by pretraining_corpus.read_encoded_documents with this encoder's
      varints.
    counter: optional callable(new_documents, records_so_far), every 1000 documents.
    stats: optional dict of counts; gets "instances" and "masked_tokens" added.
    store: None (a list is returned), or a record_store.RecordStore that takes the
      records (an iterable over them, shuffled, is returned).
    """
    generator = pretraining_generator.Generator(options, encoder.symbols,
                                                pretraining_draws.draws_for(rng))
    encode = encoder.encode
    records = [] if store is None else store
    masked = 0
    total_documents = len(documents) * options.dupe_factor
    reported = [0]

    def on_document(done):
        if progress is not None:
            progress.report(done, len(records))
        if counter is not None:
            counter(done - reported[0], len(records))
            reported[0] = done

    for example in generator.corpus_examples(documents, on_document):
        masked += len(example[2])
        records.append(encode(*example))
    if progress is not None:
        progress.report(total_documents, len(records), force=True)
    if counter is not None:
        counter(total_documents - reported[0], len(records))
    if stats is not None:
        pretraining_corpus.add_counts(stats, instances=len(records), masked_tokens=masked)
    if store is None:
        generator.draws.shuffle(records)
        return records
    return store.shuffled(generator.draws.shuffle)


def write_single_process(input_files, output_files, tokenizer, options, use_fast_tokenizer,
                         stats, packer=None):
    """The default mode (--num_workers=1): the reference's records; returns the count."""
    encoder = pretraining_records.encoder_for(options, tokenizer.vocab)
    documents = pretraining_corpus.read_encoded_documents(
        input_files, tokenizer, use_fast_tokenizer, encoder.varints, stats, stage="reading",
        segmentation=options.word_segmentation)
    if not documents:
        raise pretraining_corpus.no_documents_error(input_files)
    logging.info("Read %d documents", len(documents))
    records = generate_records(documents, options, encoder, random.Random(options.random_seed),
                               progress=pretraining_corpus.Progress("creating instances"),
                               stats=stats,
                               store=record_store.RecordStore(
                                   directory=record_store.local_folder(output_files[0])))
    del documents
    count = pretraining_records.write_output(records, output_files, tokenizer.vocab, packer)
    if packer is not None:
        pretraining_corpus.add_counts(stats, rows=packer.num_rows, row_tokens=packer.num_tokens)
    return count


def shard_worker_state(options, corpus_bytes, open_file, vocab_file, do_lower_case,
                       use_fast_tokenizer, max_instances_per_row=None):
    """What a worker of the per-file mode keeps: tokenizer, options, record encoder.

    options: PretrainingOptions (or its fields); corpus_bytes: the size of all input
    files (the worker's tokenizer serves many); open_file: callable(path) -> binary
    file (None: GFile); max_instances_per_row: pack each file's instances (None: no
    packing).
    """
    options = pretraining_options.PretrainingOptions(*options)
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    return dict(tokenizer=tokenizer, options=options, use_fast=use_fast_tokenizer,
                corpus_bytes=corpus_bytes,
                encoder=pretraining_records.encoder_for(options, tokenizer.vocab),
                per_row=max_instances_per_row,
                open_file=open_file or pretraining_corpus.gfile_open)


def shard_records(state, file_index, path, counter):
    """(shuffled records, stats) of one input file under its shard seed.

    The records are packed rows (packed in their shuffled order) when the state
    packs. stats counts files, bytes, documents, instances, masked_tokens (and
    rows, row_tokens when packing).
    """
    options, encoder = state["options"], state["encoder"]
    stats = {}
    words = options.word_segmentation and options.word_segmentation.for_file(file_index)
    documents = pretraining_corpus.read_encoded_documents(
        [path], state["tokenizer"], state["use_fast"], encoder.varints, stats,
        open_file=state["open_file"], batch_bytes=state["corpus_bytes"], segmentation=words)
    records = []
    if documents:
        rng = random.Random(pretraining_shards.shard_seed(options.random_seed, file_index))
        records = generate_records(documents, options, encoder, rng, counter=counter,
                                    stats=stats)
    del documents
    if state["per_row"]:
        packer = pretraining_records.InstancePacker(
            options.max_seq_length, options.max_predictions_per_seq, state["per_row"])
        records = list(packer.pack_records(records))
        pretraining_corpus.add_counts(stats, rows=packer.num_rows, row_tokens=packer.num_tokens)
    return records, stats
