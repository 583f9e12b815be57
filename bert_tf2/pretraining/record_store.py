"""create_pretraining_data's records between generation and writing, in bounded memory.

The reference holds every instance of the corpus in memory to shuffle them before
writing. `RecordStore` keeps the serialized records in memory up to `spill_bytes`,
then moves them to an anonymous temporary file (removed when closed; beside the
output when that is a local folder, as the records will be) and keeps only
each record's end offset. `shuffled(shuffle)` gives the records in the order
`shuffle(records)` would leave a list of them in: it shuffles the record numbers
instead, which draws exactly the same random numbers (a shuffle's draws depend on
the length only), then reads the records back in that order.
"""
import array
import os
import tempfile


def local_folder(path):
    """The folder of a local file path (None for a URL such as gs://...)."""
    if "://" in path:
        return None
    return os.path.dirname(os.path.abspath(path))


# Records kept in memory before the store moves them to its temporary file.
SPILL_BYTES = 128 << 20


class RecordStore(object):
    """A list-like sink of serialized records (append, len), then one shuffled pass."""

    def __init__(self, spill_bytes=SPILL_BYTES, directory=None):
        self.spill_bytes = spill_bytes
        self.directory = directory  # of the temporary file (None: the system's)
        self._records = []  # in memory, not yet in the file
        self._buffered = 0
        self._file = None
        self._ends = array.array("Q")  # end offset in the file of each record there

    def append(self, record):
        self._records.append(record)
        self._buffered += len(record)
        if self._buffered >= self.spill_bytes:
            self._spill()

    def __len__(self):
        return len(self._ends) + len(self._records)

    @property
    def spilled(self):
        """True once the records live in the temporary file."""
        return self._file is not None

    def _spill(self):
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="create_pretraining_data_",
                                                dir=self.directory)
        end = self._ends[-1] if self._ends else 0
        for record in self._records:
            end += len(record)
            self._ends.append(end)
        self._file.write(b"".join(self._records))
        self._records = []
        self._buffered = 0

    def shuffled(self, shuffle):
        """The records, in the order `shuffle(list_of_the_records)` would give.

        shuffle: an in-place shuffle of a mutable sequence (random.Random.shuffle or
        pretraining_draws' equivalent); it is called once, on the records themselves
        while they are all in memory, else on their numbers.
        """
        if self._file is None:
            records, self._records = self._records, []
            shuffle(records)
            return records
        self._spill()
        self._file.flush()
        order = array.array("Q", range(len(self._ends)))
        shuffle(order)
        return self._read(order)

    def _read(self, order):
        ends, source = self._ends, self._file
        descriptor = source.fileno()
        try:
            for number in order:
                start = ends[number - 1] if number else 0
                yield os.pread(descriptor, ends[number] - start, start)
        finally:
            source.close()
