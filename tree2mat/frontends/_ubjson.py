"""A strict UBJSON (Universal Binary JSON, draft 12) decoder for XGBoost's ``.ubj`` model files.

It reads what XGBoost writes: objects ``{`` (keys as a length and UTF-8 bytes), arrays ``[`` with
an optional count ``#`` and element type ``$`` (typed arrays of numbers, read in one piece),
big-endian integers ``i U I l L``, floats ``d D``, strings ``S``, chars ``C``, ``T F Z``; and
decodes to what ``json.loads`` gives for the same document (dict, list, str, int, float, bool,
None). Anything else, truncated input, counts beyond the remaining bytes (refused before
allocating), duplicate keys, trailing bytes and nesting deeper than ``MAX_DEPTH`` raise
``ModelFileError`` naming the file and the byte offset.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError

MAX_DEPTH = 64
_NUMBERS = {
    ord(m): struct.Struct(f) for m, f in (("i", ">b"), ("U", ">B"), ("I", ">h"), ("l", ">i"), ("L", ">q"), ("d", ">f"), ("D", ">d"))
}
_CONSTANTS = {ord("Z"): None, ord("T"): True, ord("F"): False}


def decode(data: bytes, name: str) -> Any:
    """The document in ``data`` (the bytes of file ``name``)."""
    reader = _Reader(data, name)
    value = reader.value(reader.marker(), 0)
    if reader.pos != len(data):
        raise reader.error("trailing bytes after the document")
    return value


class _Reader:
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.name, self.pos = data, name, 0

    def error(self, what: str, at: int | None = None) -> ModelFileError:
        return ModelFileError(f"{self.name}: not a valid UBJSON model file: {what} at byte {self.pos if at is None else at}")

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise self.error(f"truncated: {n} bytes needed, {len(self.data) - self.pos} left")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def marker(self) -> int:
        return self.take(1)[0]

    def number(self, marker: int) -> int | float:
        fmt = _NUMBERS[marker]
        return fmt.unpack(self.take(fmt.size))[0]

    def count(self, item_bytes: int = 1) -> int:
        """A length or count (an integer of any width), at most what the remaining bytes hold."""
        at = self.pos
        marker = self.marker()
        if marker not in _NUMBERS or chr(marker) in "dD":
            raise self.error(f"a length must be an integer, found marker {chr(marker)!r}", at)
        n = int(self.number(marker))  # (an integer marker: not d/D)
        if n < 0:
            raise self.error(f"negative length {n}", at)
        if n * item_bytes > len(self.data) - self.pos:
            left = len(self.data) - self.pos
            raise self.error(f"truncated: length {n} needs at least {n * item_bytes} bytes, {left} left", at)
        return n

    def string(self) -> str:
        at = self.pos
        raw = self.take(self.count())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error("string is not UTF-8", at) from exc

    def value(self, marker: int, depth: int) -> Any:
        if marker in _CONSTANTS:
            return _CONSTANTS[marker]
        if marker in _NUMBERS:
            return self.number(marker)
        if marker == ord("S"):
            return self.string()
        if marker == ord("C"):
            char = self.take(1)[0]
            if char > 127:
                raise self.error("a char must be ASCII", self.pos - 1)
            return chr(char)
        if marker in (ord("["), ord("{")):
            if depth >= MAX_DEPTH:
                raise self.error(f"nested deeper than {MAX_DEPTH} levels")
            return self.array(depth + 1) if marker == ord("[") else self.object(depth + 1)
        raise self.error(f"unknown or unsupported marker {chr(marker)!r}", self.pos - 1)

    def _peek(self, marker: str) -> bool:
        """Consume ``marker`` if it comes next (inside a container: the data cannot end here)."""
        if self.take(1)[0] == ord(marker):
            return True
        self.pos -= 1
        return False

    def array(self, depth: int) -> list:
        if self._peek("$"):
            at = self.pos
            kind = self.marker()
            if kind not in _NUMBERS:
                raise self.error(f"typed arrays of {chr(kind)!r} are not supported", at)
            if not self._peek("#"):
                raise self.error("a typed array needs a count ('#')")
            size = _NUMBERS[kind].size
            n = self.count(size)
            dtype = np.dtype(_NUMBERS[kind].format)
            values = np.frombuffer(self.data, dtype, n, self.pos).tolist()
            self.pos += n * size
            return values
        if self._peek("#"):
            return [self.value(self.marker(), depth) for _ in range(self.count())]
        out = []
        while not self._peek("]"):
            out.append(self.value(self.marker(), depth))
        return out

    def object(self, depth: int) -> dict:
        if self._peek("$"):
            raise self.error("typed objects are not supported", self.pos - 1)
        n = self.count(2) if self._peek("#") else None
        out: dict[str, Any] = {}
        while (len(out) < n) if n is not None else not self._peek("}"):
            at = self.pos
            key = self.string()
            if key in out:
                raise self.error(f"duplicate key {key!r}", at)
            out[key] = self.value(self.marker(), depth)
        return out
