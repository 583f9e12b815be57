"""What makes tokenization.py's exact path fast, with the output unchanged.

* Per-character tables: the str.translate maps of BasicTokenizer's cleanup and CJK
  steps (CLEAN_MAP, CHINESE_MAP), filled in as characters are seen.
* ASCII shortcuts: regexes that do BasicTokenizer's work on ASCII text in one pass of
  C code (ascii_words, ASCII_SPLIT_RE).
* TokenCache: FullTokenizer.tokenize's memory of the tokens of every whitespace-separated
  piece of text (and of every word's WordPiece split).

They know the stock steps alone: tokenization takes them only for a BasicTokenizer /
WordpieceTokenizer that is its class itself, with no method replaced (is_plain). This
module never imports tokenization (nor TensorFlow).
"""
import re

from bert_tf2.text import characters


def cleaned(cp):
    """What _clean_text makes of code point `cp`: None (deleted), " " or itself."""
    char = chr(cp)
    if cp == 0 or cp == 0xFFFD or characters.is_control(char):
        return None
    if characters.is_whitespace(char):
        return " "
    return cp  # an int maps to that code point, i.e. the character is kept


def spaced_if_chinese(cp):
    """What _tokenize_chinese_chars makes of `cp`: " c " for a CJK ideograph, else itself."""
    return " %s " % chr(cp) if characters.is_chinese_char(cp) else cp


# str.translate tables of the two per-character steps, filled in as characters are seen.
CLEAN_MAP = characters.CharacterMap(cleaned)
CHINESE_MAP = characters.CharacterMap(spaced_if_chinese)

# The ASCII characters _clean_text deletes: C0 controls and DEL, but not tab,
# newline and CR (which become spaces).
ASCII_DELETED = "".join(char for char in map(chr, range(128)) if cleaned(ord(char)) is None)
ASCII_DELETED_RE = re.compile("[%s]" % re.escape(ASCII_DELETED))
ASCII_PUNCTUATION_CLASS = "".join(sorted(characters.ASCII_PUNCTUATION))
# A punctuation character alone, or a run of anything else: on ASCII text without
# whitespace this is exactly what _run_split_on_punc cuts.
ASCII_SPLIT_RE = re.compile("[%s]|[^%s]+" % ((re.escape(ASCII_PUNCTUATION_CLASS),) * 2))
# The same, where runs also stop at whitespace: on cleaned ASCII text (whose only
# whitespace left is space, tab, newline and CR) this gives BasicTokenizer's words.
ASCII_WORDS_RE = re.compile("[%s]|[^%s \t\n\r]+" % (
    (re.escape(ASCII_PUNCTUATION_CLASS),) * 2))

# The whitespace characters _clean_text deletes instead of turning into spaces:
# \x0b, \x0c, \x1c-\x1f and \x85, all Cc. Category Cc lies within Latin-1 and is
# closed to new characters, and no Cf character is whitespace to str.split (a test
# checks every code point), so scanning Latin-1 finds them all.
DELETED_SPACES = "".join(
    char for char in map(chr, range(256)) if char.isspace() and cleaned(ord(char)) is None)
DELETED_SPACES_RE = re.compile("[%s]" % re.escape(DELETED_SPACES))


# Every CJK ideograph (characters.CJK_RANGES) as a captured group: splitting a piece of
# text with it gives the runs between ideographs and the ideographs, in turn.
IDEOGRAPH_SPLIT_RE = re.compile("([%s])" % "".join(
    "\\U%08x-\\U%08x" % (low, high) for low, high in characters.CJK_RANGES))


def ascii_words(text, do_lower_case):
    """BasicTokenizer's words of ASCII `text`, in one pass of C code.

    ASCII has no ideographs and nothing for NFD to decompose or strip, and lower()
    works character by character, so the steps reduce to deleting controls,
    lower-casing the whole text and cutting at whitespace and punctuation.
    """
    if ASCII_DELETED_RE.search(text) is not None:
        text = ASCII_DELETED_RE.sub("", text)
    if do_lower_case:
        text = text.lower()
    return ASCII_WORDS_RE.findall(text)


# What is_plain looks for on an instance: the names its class defines, by class.
CLASS_NAMES = {}


def is_plain(tokenizer, cls):
    """True when `tokenizer` is a `cls` itself, with no method replaced on the instance.

    Only then may the exact path take its shortcuts, which know the stock steps alone.
    (The names of `cls` are read once, at its first check.)
    """
    if type(tokenizer) is not cls:
        return False
    names = CLASS_NAMES.get(cls)
    if names is None:
        names = CLASS_NAMES[cls] = frozenset(vars(cls))
    return vars(tokenizer).keys().isdisjoint(names)


# Entries each cache of a TokenCache holds before it is emptied and starts over: this
# bounds its memory on an endless stream of new words, and is far more than the
# distinct pieces of SQuAD dev (47k).
CACHE_LIMIT = 200000


class TokenCache(object):
    """FullTokenizer.tokenize for a plain BasicTokenizer and WordpieceTokenizer, remembered.

    The tokens of a text are those of its whitespace-separated pieces, one after the
    other: every step before the split (deleting characters, turning whitespace into
    spaces, isolating CJK ideographs) acts on one character at a time and never joins
    two pieces, and every step after it (including the final re-split on whitespace)
    acts within a piece. Only the whitespace characters that _clean_text deletes would
    join pieces, so they go first. The tokens of a piece then depend on the piece and
    the settings alone, and repeated pieces (most of any text) cost one dict lookup.
    A piece holding CJK ideographs is remembered by its parts instead (tokenize_ideographs).

    The cached tokens hold for one lower-casing, vocabulary, unknown token and word
    length limit (`fits`). A vocabulary is recognized by its identity and size: a new
    dict, or entries added to or deleted from the old one, need a new cache. (An edit
    that keeps the size, deleting one entry and adding another, goes unnoticed; assign
    a new dict for that.) The ids do not matter here, only which entries exist.
    Each of the two caches holds at most `limit` entries (CACHE_LIMIT when None).
    """

    def __init__(self, basic, wordpiece, limit=None):
        self.vocab = wordpiece.vocab
        self.settings = self.settings_of(basic, wordpiece)
        self.limit = CACHE_LIMIT if limit is None else limit
        self.pieces = {}  # piece of text -> tuple of tokens
        self.words = {}  # word -> tuple of its WordPiece tokens

    @staticmethod
    def settings_of(basic, wordpiece):
        """The settings cached tokens hold for, besides the vocabulary's identity."""
        return (bool(basic.do_lower_case), len(wordpiece.vocab), wordpiece.unk_token,
                wordpiece.max_input_chars_per_word)

    def fits(self, basic, wordpiece):
        """True when the cached tokens hold for `basic` and `wordpiece`."""
        return (wordpiece.vocab is self.vocab
                and self.settings_of(basic, wordpiece) == self.settings)

    def tokenize(self, text, basic, split_word):
        """The WordPiece tokens of `text` (a str), as FullTokenizer.tokenize gives them.

        basic: the BasicTokenizer; split_word: the WordPiece split of one word (the
        WordpieceTokenizer's _split_word, what its tokenize does for every word).
        """
        if DELETED_SPACES_RE.search(text) is not None:
            text = DELETED_SPACES_RE.sub("", text)
        tokens = []
        cached = self.pieces.get
        for piece in text.split():
            found = cached(piece)
            if found is None:
                if piece.isascii() or IDEOGRAPH_SPLIT_RE.search(piece) is None:
                    found = self.tokenize_piece(piece, basic, split_word)
                else:
                    found = self.tokenize_ideographs(piece, basic, split_word)
            tokens += found
        return tokens

    def tokenize_ideographs(self, piece, basic, split_word):
        """Tokens of a piece holding CJK ideographs, from those of its parts.

        The reference puts spaces around every ideograph before any step that looks at
        more than one character (the cleanup before it deletes or keeps characters one
        by one, and never an ideograph), so the tokens of the piece are those of its
        runs between ideographs and of each ideograph, in turn. The parts are what is
        remembered: Chinese text has few spaces, so its pieces are long and rarely seen
        twice, while its ideographs and the runs between them repeat.
        """
        found = []
        cached = self.pieces.get
        for part in IDEOGRAPH_SPLIT_RE.split(piece):
            if part:
                part_tokens = cached(part)
                if part_tokens is None:
                    part_tokens = self.tokenize_piece(part, basic, split_word)
                found += part_tokens
        return found

    def tokenize_piece(self, piece, basic, split_word):
        """Tokens of one whitespace-free piece of text (a tuple), remembered.

        Different pieces share words ("word", "word," and "(word"), so the WordPiece
        split of each word is remembered too.
        """
        found = []
        if piece.isascii():
            words = ascii_words(piece, basic.do_lower_case)
        else:
            words = basic.tokenize(piece)
        words_cache = self.words
        for word in words:
            word_pieces = words_cache.get(word)
            if word_pieces is None:
                # A word holds no whitespace, so this is wordpiece.tokenize(word).
                word_pieces = tuple(split_word(word))
                if len(words_cache) >= self.limit:
                    words_cache.clear()
                words_cache[word] = word_pieces
            found += word_pieces
        found = tuple(found)
        if len(self.pieces) >= self.limit:
            self.pieces.clear()
        self.pieces[piece] = found
        return found
