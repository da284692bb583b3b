"""What a run of shardify.write is made from, recorded in each part it writes.

A part is resumed only by a run made from the same: its inputs, fn, split names, fields and
Writer options, each reduced to a short text and stored in the part manifest's provenance
options (the merged dataset keeps them). ``key=`` stands for the inputs and fn where their
repr() is not stable from one run to the next."""

import functools
import hashlib
import re
import types

# Provenance option -> what it records, as an error names it.
_KEYS = {"write.inputs": "inputs", "write.fn": "fn", "write.key": "key", "write.split": "split",
         "write.options": "fields and options"}
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_NOT_OUTPUT = ("threads", "fsync")  # Writer options that leave the bytes as they are


def digest(values):
    """A digest of the list ``values`` that is the same in every process: of their repr(),
    an object's address (``<X object at 0x...>``) left out."""
    h = hashlib.blake2b(digest_size=8)
    for k in range(0, len(values), 4096):
        text = repr(values[k:k + 4096])
        if " at 0x" in text:
            text = _ADDRESS.sub("", text)
        h.update(text.encode("utf-8", "backslashreplace"))
    return h.hexdigest()


def _code(code):
    """A lambda's code: its bytecode, names and constants (nested code included)."""
    consts = [_code(c) if isinstance(c, types.CodeType) else c for c in code.co_consts]
    return digest([code.co_code, code.co_names, consts])


def fn_identity(fn):
    """``module.qualname`` of ``fn`` (of its class for a callable object); a lambda adds its
    code, a functools.partial its arguments. The code of a named function is left out, so
    that a run resumes after a fix to ``fn`` (the usual reason it stopped)."""
    if isinstance(fn, functools.partial):
        return f"partial({fn_identity(fn.func)}) {digest([fn.args, fn.keywords])}"
    named = fn if hasattr(fn, "__qualname__") else type(fn)
    name = f"{getattr(named, '__module__', None)}.{named.__qualname__}"
    code = getattr(fn, "__code__", None)
    return f"{name} {_code(code)}" if name.endswith("<lambda>") and code is not None else name


def make(fn, inputs, splits, fields, options, key):
    """The record of a run: {provenance option: text}. ``fields``: Writer's canonical field
    dicts; ``splits``: one name or a name per input."""
    record = {"write.key": str(key)} if key is not None else {
        "write.inputs": f"{len(inputs)} inputs {digest(inputs)}", "write.fn": fn_identity(fn)}
    record["write.split"] = splits if isinstance(splits, str) else f"{len(splits)} names {digest(splits)}"
    kept = sorted((k, v) for k, v in options.items() if k not in _NOT_OUTPUT)
    record["write.options"] = digest([fields, kept])
    return record


def differences(found, record):
    """What differs between the record ``found`` in a part or dataset (its provenance
    options) and ``record``, as text; "" when it is the same run."""
    out = []
    for k, what in _KEYS.items():
        was, now = found.get(k), record.get(k)
        if was != now:
            out.append(f"{what} {'none' if was is None else repr(was)} there, {'none' if now is None else repr(now)} "
                       "in this call")
    return "; ".join(out)


def written_by_write(found):
    """Whether the provenance options ``found`` hold a record of shardify.write."""
    return any(k in found for k in _KEYS)
