"""The analysis a node run sends its processes, with its Universes apart.

A warm engine (``with NodeBackend() as node:``) runs analysis after analysis on the same
processes, usually on the same Universe. Unpickling a Universe (its topology, its
AtomGroups, a reader that opens the trajectory again) is most of what a reader or worker
does before its first frame: for 1M atoms ~0.05-0.1 s in each of 24-30 processes at once,
whose page faults also slow the GPU workers' start (benchmarks/NOTES.md). So the payload
carries each Universe as its own pickle, named by a hash of those bytes, and the analysis
refers to it by name; a process keeps the Universes it unpickled (:data:`KEEP` of them) and
unpickles a name it has not seen. Equal bytes are an equal Universe (topology, trajectory
file and position, transformations), so a kept one is the one the parent would send; a
Universe changed in any way pickles differently and is unpickled anew.

A Universe owns its reader: an analysis holding the reader (``_trajectory``, a sliced
trajectory) must get the kept Universe's reader, not a copy, or it would read frames the
AtomGroups never see. The readers of the Universes found among the analysis's attributes
are therefore named too; a reader met without its Universe known makes the whole payload
an ordinary pickle (correct, only not shared).

Between runs the parent still pickles each Universe (only its bytes say whether it
changed), but names bytes equal to its last pickle of that Universe without hashing them
again, and a payload is kept in pieces (:class:`Payload`): a warm engine writes them to the
run's file, and its processes map that file (:func:`read`), so that a kept Universe's bytes
are neither joined, nor copied into 30 processes.
"""

from __future__ import annotations

import collections
import hashlib
import io
import mmap
import pickle
import struct
import weakref

from MDAnalysis.coordinates.base import ProtoReader
from MDAnalysis.core.groups import AtomGroup
from MDAnalysis.core.universe import Universe

__all__ = ["Payload", "dump", "dumps", "loads", "read"]

#: Universes a process keeps (the most recently used)
KEEP = 4
_kept: collections.OrderedDict = collections.OrderedDict()
#: what the last :func:`loads` of this process did: Universes taken from those kept, and
#: unpickled (for tests and traces)
last_load = {"kept": 0, "unpickled": 0}

_PROTOCOL = pickle.HIGHEST_PROTOCOL

#: this process's last pickle of each Universe: id -> (weak reference, bytes, name)
_named: collections.OrderedDict = collections.OrderedDict()


def _name_of(u, blob) -> str:
    """The name of `u`'s pickle `blob`: the last name of `u` when its bytes are the same
    (a comparison, not a hash), else a hash of them."""
    last = _named.get(id(u))
    if last is not None and last[0]() is u and last[1] == blob:
        _named.move_to_end(id(u))
        return last[2]
    name = hashlib.sha256(blob).hexdigest()[:32]
    try:
        _named[id(u)] = (weakref.ref(u), blob, name)
    except TypeError:  # (not weakly referable: named each time)
        return name
    while len(_named) > KEEP:
        _named.popitem(last=False)
    return name


class _Unsafe(Exception):
    """A reader of an unknown Universe: the payload is pickled whole."""


def _universes_of(analysis) -> list:
    """The Universes of `analysis`'s AtomGroups and Universes (its attributes, and one
    level of the lists, tuples and dicts among them)."""
    found = {}

    def add(x):
        if isinstance(x, AtomGroup):
            x = x.universe
        if isinstance(x, Universe):
            found[id(x)] = x

    for v in vars(analysis).values() if hasattr(analysis, "__dict__") else ():
        add(v)
        if isinstance(v, (list, tuple)):
            for w in v:
                add(w)
                if isinstance(w, (list, tuple)):
                    for z in w:
                        add(z)
        elif isinstance(v, dict):
            for w in v.values():
                add(w)
    return list(found.values())


class _Pickler(pickle.Pickler):
    def __init__(self, f, universes):
        super().__init__(f, protocol=_PROTOCOL)
        self.blobs = {}      # name -> pickled Universe
        self.names = {}      # id(Universe) -> name
        self.readers = {}    # id(reader) -> name of its Universe
        self.plain_readers = set()
        for u in universes:
            self._name(u)

    def _name(self, u):
        name = self.names.get(id(u))
        if name is None:
            blob = pickle.dumps(u, protocol=_PROTOCOL)
            name = _name_of(u, blob)
            self.blobs.setdefault(name, blob)
            self.names[id(u)] = name
            reader = getattr(u, "trajectory", None)
            if reader is not None:
                if id(reader) in self.plain_readers:
                    raise _Unsafe  # its reader was already pickled as a copy
                self.readers[id(reader)] = name
        return name

    def persistent_id(self, obj):
        if isinstance(obj, Universe):
            return ("universe", self._name(obj))
        if isinstance(obj, ProtoReader):
            name = self.readers.get(id(obj))
            if name is None:
                self.plain_readers.add(id(obj))
                raise _Unsafe
            return ("reader", name)
        return None


_MAGIC = b"FRDFPAY1"


class Payload:
    """A payload in pieces (magic, header, body, the Universes' pickles), joined only for
    a process that needs the bytes (a forked or spawned one), written as they are to a
    warm engine's run file."""

    __slots__ = ("parts", "_joined")

    def __init__(self, parts):
        self.parts = list(parts)
        self._joined = self.parts[0] if len(self.parts) == 1 else None

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def joined(self) -> bytes:
        if self._joined is None:
            self._joined = b"".join(self.parts)
        return self._joined

    def write(self, path: str) -> None:
        with open(path, "wb") as f:
            f.writelines(self.parts)


def dump(func, analysis=None) -> Payload:
    """`func` pickled with its Universes apart (see the module); `analysis`: the object
    whose attributes name the Universes (default: none known before pickling).

    The bytes: a magic, the length of a header, the header (the body's length and each
    Universe's name and length), the body, the Universes' pickles (unpickled by
    :func:`loads` only when not kept)."""
    universes = _universes_of(analysis) if analysis is not None else []
    buf = io.BytesIO()
    try:
        p = _Pickler(buf, universes)
        p.dump(func)
        blobs, body = p.blobs, buf.getvalue()
    except _Unsafe:
        blobs, body = {}, pickle.dumps(func, protocol=_PROTOCOL)
    header = pickle.dumps((len(body), [(name, len(b)) for name, b in blobs.items()]),
                          protocol=_PROTOCOL)
    return Payload([_MAGIC, struct.pack("<Q", len(header)), header, body, *blobs.values()])


def dumps(func, analysis=None) -> bytes:
    """:func:`dump`'s payload as bytes."""
    return dump(func, analysis).joined()


def read(path: str):
    """A payload file (:meth:`Payload.write`) mapped, not read: :func:`loads` touches the
    pages of the Universes it unpickles only."""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _split(data):
    """(the Universes' pickles by name, as memoryviews; the body) of :func:`dumps`' bytes."""
    mv = memoryview(data)
    if bytes(mv[:8]) != _MAGIC:
        raise pickle.UnpicklingError("payload: not a node run's payload")
    (n_header,) = struct.unpack("<Q", mv[8:16])
    body_len, sizes = pickle.loads(mv[16:16 + n_header])
    at = 16 + n_header
    body = mv[at:at + body_len]
    at += body_len
    blobs = {}
    for name, n in sizes:
        blobs[name] = mv[at:at + n]
        at += n
    return blobs, body


def _kept_universe(name, blobs):
    """The Universe `name`: the kept one, or unpickled from `blobs` (and kept); counted in
    :data:`last_load`."""
    u = _kept.get(name)
    if u is not None:
        _kept.move_to_end(name)
        last_load["kept"] += 1
        return u
    u = pickle.loads(blobs[name])
    last_load["unpickled"] += 1
    _kept[name] = u
    while len(_kept) > KEEP:
        _kept.popitem(last=False)
    return u


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, blobs):
        super().__init__(f)
        self.blobs = blobs
        self.seen = {}  # name -> Universe, within this load

    def persistent_load(self, pid):
        kind, name = pid
        u = self.seen.get(name)
        if u is None:
            u = self.seen[name] = _kept_universe(name, self.blobs)
        if kind == "universe":
            return u
        if kind == "reader":
            return u.trajectory
        raise pickle.UnpicklingError(f"payload: unknown reference {pid!r}")


def loads(payload):
    """The object :func:`dumps` pickled (bytes, or a file :func:`read` mapped), with the
    Universes this process kept."""
    last_load["kept"] = last_load["unpickled"] = 0
    blobs, body = _split(payload)
    try:
        return _Unpickler(io.BytesIO(body), blobs).load()
    finally:  # (a mapping closes once no view of it is left)
        body.release()
        for v in blobs.values():
            v.release()
