"""create_pretraining_data's machinery: the corpus reader (pretraining_corpus), the exact
random draws (pretraining_draws), records (pretraining_records), the per-file shards
(pretraining_shards), Apache Beam (pretraining_beam) and Chinese word boundaries.

Contracts with the other modules (create_pretraining_data.py and its neighbours in
bert_tf2/pretraining/):
create_pretraining_data.py reads in the reference's order: its flags (one table, `_FLAGS`),
every reference name (TrainingInstance, write_instance_to_example_files, create_int_feature
/ create_float_feature, create_training_instances, create_instances_from_document,
MaskedLmInstance, create_masked_lm_predictions, truncate_seq_pair), then `Settings`,
`run(settings, beam_args=()) -> Result` (outputs["output_files"]; metrics["records"] and the
summary line's counts), `options_of(settings) -> PretrainingOptions`, write_pretraining_data
and main() (which gc.freeze()s the imports' objects: the process ends after the run). The
package holds the rest:
- pretraining_generator: Generator(options, symbols, draws) (corpus_examples,
  document_examples, mask: the algorithm on any token values, every draw in the reference's
  order) and truncate_pair(tokens_a, tokens_b, max_num_tokens, random_value).
- pretraining_pipeline: generate_records(documents, options, encoder, rng, progress,
  counter, stats, store=None) (a list, or a RecordStore's shuffled iterable),
  write_single_process (the default mode), collector_skips_existing_objects() (gc.freeze for
  a run, unfrozen after, unless the caller froze), and the per-file algorithm both parallel
  modes run: `shard_worker_state(options, corpus_bytes, open_file, vocab_file,
  do_lower_case, use_fast, max_instances_per_row=None)` + `shard_records(state, file_index,
  path, counter) -> (shuffled records or packed rows, stats)` (seed:
  `pretraining_shards.shard_seed(random_seed, file_index)`; both also importable from
  create_pretraining_data); stats counts files, bytes, documents, instances, masked_tokens
  (+ rows, row_tokens), summed by the caller and printed by
  `pretraining_corpus.summary_line` in every mode.
- record_store: RecordStore(spill_bytes=SPILL_BYTES, 128 MiB) (append, len, spilled,
  shuffled(shuffle)): records past spill_bytes go to an anonymous temporary file; shuffled()
  shuffles the record numbers (the same draws as shuffling the records) and reads them back.
- pretraining_options: PretrainingOptions (lengths, probabilities, dupe_factor, whole-word
  mask, seed, word_segmentation; a namedtuple sent to workers as a tuple), .validate() ->
  warnings.
- pretraining_corpus: read_documents(files, tokenize_lines, on_progress=None,
  open_file=gfile_open), text_blocks, line_tokenizer(tokenizer, use_fast, encoded=None),
  read_tokenized(...), read_encoded_documents(files, tokenizer, use_fast, varints, stats,
  ...), Progress(stage), summary_line(stats, max_seq_length), add_counts / sum_counts (dicts
  of counts).
- pretraining_draws: Draws(rng) / FastDraws(rng) (random, randint, shuffle; same values and
  state as random.Random), draws_for(rng), fast_draws_agree().
- pretraining_records: ExampleEncoder(vocab, L, P).encode, Symbols (a namedtuple;
  for_strings / for_encoded: the token values the algorithm handles), encoder_for(options,
  vocab) -> Encoding(varints, encode, symbols), InstancePacker, packed_features,
  decode_instance, instance_features / instance_record (protobuf path),
  write_output(records, files, vocab, packer=None), write_instances.
- pretraining_shards: sharded_records(...) (this process and N - 1 workers taking the files
  in turn, temporary shard files, even interleave), shard_seed, write_shard_file /
  interleave_shards (also byte ranges of a file); write_sharded(input_files, output_files,
  num_workers, options, setup, worker_args, make_records, vocab, stats, packed) -> records
  written (setup called as setup(tuple(options), corpus_bytes, open_file, *worker_args), as
  write_beam does).
- pretraining_beam (only with --runner; imports apache_beam): split_args(argv, define_flags)
  -> (absl argv, Beam options: only those beam_options() lists, i.e. Beam's PipelineOptions
  declare; anything else a ValueError with a did-you-mean; used by main() only),
  write_beam(patterns, output_files, options, setup, worker_args, make_records, settings,
  stats) (matches the files, pairs the word boundaries, runs run_pipeline),
  run_pipeline(patterns, output_files, setup, setup_args, make_records, random_seed,
  settings, stats) -> records written; open_file (Beam file systems). Takes the per-file
  functions as arguments (never imports the runner). Output shard of a record:
  output_rng(random_seed, file_index); outputs renamed from a temporary folder on success
  only. A worker's ValueError / OSError / OpError is marked and raised again in the entry
  point as one ValueError; local runners' workers log at CRITICAL, their stderr goes to
  os.devnull and Beam's logged errors to debug level while the pipeline runs (all of it kept
  with --verbosity=1).
- word_boundaries (Chinese whole-word masking): define_flags(fv),
  segmentation(chinese_word_segmenter, word_boundary_file) -> WordSegmentation(segmenter,
  files) or None (PretrainingOptions.word_segmentation, default None); resolve(options,
  input_files, expand, fast) checks --do_whole_word_mask / jieba and pairs the boundary
  files (the i-th with the i-th input file) before any worker starts;
  WordSegmentation.for_file(file_index) (per-file mode), .reader(number, path, open_file) ->
  .words(lines) / .close() (a boundary file checked line by line), .tokenizer(tokenize) ->
  tokenize(lines, words): the tokenizer's tokens, continuing CJK characters as JoinedBytes /
  JoinedStr (equal to the plain value); pretraining_records.Symbols.for_encoded(...,
  joined=True) tests for the mark through joined_tests. pretraining_corpus.read_documents /
  read_tokenized take `segmentation=` and never import word_boundaries.
- fileutil.output_files(value, num_shards, flag): the --output_file list, or
  PREFIX-00000-of-0000N names (stale shards of another run under the prefix refused; folders
  made and probed by prepare_output_file).
"""
