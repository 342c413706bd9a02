"""Spark's event-log codecs, streamed: the framing of each codec's Java stream, the blocks decoded
by well-kept libraries.

Spark (3.x and 4.x alike) writes a compressed event log through ``CompressionCodec
.compressedContinuousOutputStream``:

=========  =======================================================  ==============================
codec      Java stream (library)                                    framing read here
=========  =======================================================  ==============================
``zstd``   ``ZstdOutputStreamNoFinalizer`` (zstd-jni),              standard zstd frames, one per
           ``setCloseFrameOnFlush(true)``                           flush, concatenated
``lz4``    ``LZ4BlockOutputStream`` (lz4-java)                      ``LZ4Block`` blocks: magic,
                                                                    token, lengths, XXHash32
``snappy`` ``SnappyOutputStream`` (snappy-java)                     ``\\x82SNAPPY\\0`` header, then
                                                                    length-prefixed raw blocks
``lzf``    ``LZFOutputStream`` (compress-lzf),                      ``ZV`` chunks, compressed or
           ``setFinishBlockOnFlush(true)``                          stored
=========  =======================================================  ==============================

Blocks are decoded by ``zstandard`` (zstd), ``cramjam`` (lz4 block, raw snappy) and ``python-lzf``
(liblzf); only the framing around them is read here. ``gzip`` (not a Spark codec, but how logs are
often copied around) is read with the standard library. Every decoder yields decompressed chunks
as it reads, so memory does not grow with the log. A stream that ends inside a frame or block (an
in-progress log, a cut copy) raises :class:`TruncatedLog` after yielding everything before it;
bytes that are not the codec's format raise :class:`CorruptLog`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO

CODECS = ("zstd", "lz4", "snappy", "lzf", "gzip")
"""Codec names as Spark puts them in file names (``gzip`` for ``.gz`` copies)."""

SUFFIXES = {"zstd": "zstd", "zst": "zstd", "lz4": "lz4", "snappy": "snappy", "lzf": "lzf", "gz": "gzip"}

READ_SIZE = 1 << 16
MAX_BLOCK = 1 << 26  # lz4-java allows blocks up to 32 MiB; Spark's lz4 and snappy blocks are 32 KiB

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LZ4_MAGIC = b"LZ4Block"
_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_LZF_MAGIC = b"ZV"
_GZIP_MAGIC = b"\x1f\x8b"


class LogReadError(Exception):
    """A log's bytes cannot be read as its codec says (``name`` is the file, ``offset`` the
    compressed byte where it went wrong)."""

    def __init__(self, name: str, codec: str | None, message: str, offset: int | None = None) -> None:
        self.name, self.codec, self.offset = name, codec, offset
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{name}: {codec or 'uncompressed'} stream {message}{where}")


class CorruptLog(LogReadError):
    pass


class TruncatedLog(LogReadError):
    pass


class UnknownCodec(LogReadError):
    def __init__(self, name: str, codec: str) -> None:
        self.name, self.codec, self.offset = name, codec, None
        Exception.__init__(
            self,
            f"{name}: unknown event-log codec {codec!r} (shufflelab reads Spark's zstd, lz4, snappy and lzf, "
            "gzip copies and uncompressed logs)",
        )


def sniff(head: bytes) -> str | None:
    """The codec whose magic bytes ``head`` starts with; ``None`` for text (JSON) or unknown bytes."""
    for codec, magic in (
        ("zstd", _ZSTD_MAGIC),
        ("lz4", _LZ4_MAGIC),
        ("snappy", _SNAPPY_MAGIC),
        ("gzip", _GZIP_MAGIC),
        ("lzf", _LZF_MAGIC),
    ):
        if head.startswith(magic):
            return codec
    return None


class _Counted:
    """A binary file that counts the bytes read from it (the compressed offset, for messages and
    progress)."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh, self.pos = fh, 0

    def read(self, n: int) -> bytes:
        b = self.fh.read(n)
        self.pos += len(b)
        return b

    def exact(self, n: int) -> bytes:
        """``n`` bytes, fewer only at the end of the file (zip members may return short reads)."""
        b = self.read(n)
        if len(b) == n or not b:
            return b
        parts = [b]
        got = len(b)
        while got < n:
            more = self.read(n - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)


def decompress(fh: BinaryIO, codec: str | None, name: str) -> Iterator[bytes]:
    """Decompressed chunks of one log file (``codec`` ``None``: uncompressed)."""
    src = fh if isinstance(fh, _Counted) else _Counted(fh)
    if codec is None:
        return _plain(src)
    decoder = {"zstd": _zstd, "lz4": _lz4, "snappy": _snappy, "lzf": _lzf, "gzip": _gzip}.get(codec)
    if decoder is None:
        raise UnknownCodec(name, codec)
    return decoder(src, name)


def _plain(src: _Counted) -> Iterator[bytes]:
    while True:
        b = src.read(1 << 20)
        if not b:
            return
        yield b


def _zstd(src: _Counted, name: str) -> Iterator[bytes]:
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    obj = dctx.decompressobj()
    in_frame = False  # the current frame has had input and has not ended
    while True:
        chunk = src.read(READ_SIZE)
        if not chunk:
            break
        while chunk:
            try:
                out = obj.decompress(chunk)
            except zstandard.ZstdError as exc:
                raise CorruptLog(name, "zstd", f"is corrupt ({exc})", src.pos - len(chunk)) from None
            in_frame = True
            if out:
                yield out
            if obj.eof:  # a frame ended (Spark closes one per flush): the rest starts the next
                chunk = obj.unused_data
                obj = dctx.decompressobj()
                in_frame = False
            else:
                chunk = b""
    if in_frame:
        raise TruncatedLog(name, "zstd", "ends inside a frame", src.pos)


def _lz4(src: _Counted, name: str) -> Iterator[bytes]:
    import cramjam

    while True:
        at = src.pos
        head = src.exact(21)
        if not head:
            return
        if len(head) < 21:
            raise TruncatedLog(name, "lz4", "ends inside a block header", at)
        if head[:8] != _LZ4_MAGIC:
            raise CorruptLog(name, "lz4", "has no LZ4Block magic", at)
        token = head[8]
        clen, olen, _checksum = struct.unpack_from("<iii", head, 9)
        method = token & 0xF0
        if not (0 <= clen <= MAX_BLOCK and 0 <= olen <= MAX_BLOCK) or method not in (0x10, 0x20):
            raise CorruptLog(name, "lz4", f"has a bad block header (method {method:#x}, lengths {clen}/{olen})", at)
        if olen == 0:  # the end mark of one LZ4BlockOutputStream; another may follow
            continue
        data = src.exact(clen)
        if len(data) < clen:
            raise TruncatedLog(name, "lz4", "ends inside a block", at)
        if method == 0x10:  # stored
            yield data
            continue
        try:
            out = bytes(cramjam.lz4.decompress_block(data, output_len=olen))
        except Exception as exc:  # cramjam raises its own DecompressionError
            raise CorruptLog(name, "lz4", f"has a corrupt block ({exc})", at) from None
        if len(out) != olen:
            raise CorruptLog(name, "lz4", f"block decoded to {len(out)} bytes, header says {olen}", at)
        yield out


def _snappy(src: _Counted, name: str) -> Iterator[bytes]:
    import cramjam

    first = True
    while True:
        at = src.pos
        head = src.exact(4)
        if not head:
            return
        if head == _SNAPPY_MAGIC[:4]:  # a (new) stream header: magic, version, compatible version
            rest = src.exact(12)
            if len(rest) < 12:
                raise TruncatedLog(name, "snappy", "ends inside the stream header", at)
            if (head + rest)[:8] != _SNAPPY_MAGIC:
                raise CorruptLog(name, "snappy", "has a bad stream header", at)
            first = False
            continue
        if first:
            raise CorruptLog(name, "snappy", "has no snappy-java stream header", at)
        if len(head) < 4:
            raise TruncatedLog(name, "snappy", "ends inside a block length", at)
        (clen,) = struct.unpack(">i", head)
        if not 0 <= clen <= MAX_BLOCK:
            raise CorruptLog(name, "snappy", f"has a bad block length {clen}", at)
        data = src.exact(clen)
        if len(data) < clen:
            raise TruncatedLog(name, "snappy", "ends inside a block", at)
        try:
            yield bytes(cramjam.snappy.decompress_raw(data))
        except Exception as exc:
            raise CorruptLog(name, "snappy", f"has a corrupt block ({exc})", at) from None


def _lzf(src: _Counted, name: str) -> Iterator[bytes]:
    import lzf

    while True:
        at = src.pos
        head = src.exact(5)
        if not head:
            return
        if len(head) < 5:
            raise TruncatedLog(name, "lzf", "ends inside a chunk header", at)
        if head[:2] != _LZF_MAGIC or head[2] not in (0, 1):
            raise CorruptLog(name, "lzf", "has a bad chunk header", at)
        (clen,) = struct.unpack_from(">H", head, 3)
        if head[2] == 0:  # stored chunk
            data = src.exact(clen)
            if len(data) < clen:
                raise TruncatedLog(name, "lzf", "ends inside a chunk", at)
            yield data
            continue
        olen_b = src.exact(2)
        if len(olen_b) < 2:
            raise TruncatedLog(name, "lzf", "ends inside a chunk header", at)
        (olen,) = struct.unpack(">H", olen_b)
        data = src.exact(clen)
        if len(data) < clen:
            raise TruncatedLog(name, "lzf", "ends inside a chunk", at)
        out = lzf.decompress(data, olen)
        if out is None or len(out) != olen:
            raise CorruptLog(name, "lzf", "has a corrupt chunk", at)
        yield out


def _gzip(src: _Counted, name: str) -> Iterator[bytes]:
    obj = zlib.decompressobj(wbits=31)
    in_member = False
    while True:
        chunk = src.read(READ_SIZE)
        if not chunk:
            break
        while chunk:
            try:
                out = obj.decompress(chunk)
            except zlib.error as exc:
                raise CorruptLog(name, "gzip", f"is corrupt ({exc})", src.pos - len(chunk)) from None
            in_member = True
            if out:
                yield out
            if obj.eof:  # concatenated members
                chunk = obj.unused_data
                obj = zlib.decompressobj(wbits=31)
                in_member = False
            else:
                chunk = b""
    if in_member:
        raise TruncatedLog(name, "gzip", "ends inside a member", src.pos)
