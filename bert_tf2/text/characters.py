"""Code point tables shared by tokenization.py's exact path and its batch path.

Which blocks count as CJK ideographs, which ASCII characters count as punctuation, the
reference's whitespace / control / punctuation classes, and a str.translate table that
fills itself in as characters are seen. Imports no TensorFlow.
"""
import unicodedata

# Code point blocks treated as "Chinese characters": each one becomes a word of
# its own. (Hangul, kana and other CJK-adjacent scripts are not in the list.)
CJK_RANGES = (
    (0x4E00, 0x9FFF),    # CJK Unified Ideographs
    (0x3400, 0x4DBF),    # Extension A
    (0x20000, 0x2A6DF),  # Extension B
    (0x2A700, 0x2B73F),  # Extension C
    (0x2B740, 0x2B81F),  # Extension D
    (0x2B820, 0x2CEAF),  # Extension E
    (0xF900, 0xFAFF),    # Compatibility Ideographs
    (0x2F800, 0x2FA1F),  # Compatibility Ideographs Supplement
)

# Every printable ASCII character that is neither a letter, a digit nor a space
# counts as punctuation, even "$", "^" or "`" which Unicode files elsewhere.
ASCII_PUNCTUATION_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))

ASCII_PUNCTUATION = frozenset(
    chr(cp) for low, high in ASCII_PUNCTUATION_RANGES for cp in range(low, high + 1))


def is_chinese_char(cp):
    """True when code point `cp` lies in one of the CJK ideograph blocks above."""
    if cp < 0x3400:  # below every block; the common case
        return False
    for low, high in CJK_RANGES:
        if low <= cp <= high:
            return True
    return False


_ASCII_SPACES = frozenset(" \t\n\r")


def is_whitespace(char):
    """True for space, tab, newline, carriage return and Unicode category Zs."""
    if char in _ASCII_SPACES:
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char):
    """True for categories Cc and Cf, except tab/newline/CR (those are whitespace)."""
    if char in _ASCII_SPACES:  # the space itself is not Cc/Cf anyway
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    """True for non-alphanumeric printable ASCII and for Unicode categories P*."""
    if char in ASCII_PUNCTUATION:
        return True
    return unicodedata.category(char).startswith("P")


class CharacterMap(dict):
    """A str.translate table that works out each code point's replacement on first sight.

    str.translate looks every code point of the text up in its table. Holding all
    1.1M code points up front would cost seconds and memory; as a dict subclass with
    __missing__, the table asks `replacement(cp)` once and remembers the answer, so
    text in a few scripts only ever fills a few hundred entries. Past `limit` entries
    (text walking the whole code space) answers are still computed, just not kept.
    """

    def __init__(self, replacement, limit=1 << 16):
        super().__init__()
        self._replacement = replacement
        self._limit = limit

    def __missing__(self, cp):
        value = self._replacement(cp)
        if len(self) < self._limit:
            self[cp] = value
        return value
