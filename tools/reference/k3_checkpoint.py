"""Reading a Kimi K3 checkpoint directory in the released format (docs/model-spec.md §1, §2, §4).

No third-party safetensors package: a shard is an 8-byte little-endian header length, a JSON
header {name: {dtype, shape, data_offsets}} (offsets relative to the data section that starts
right after the header; `__metadata__` ignored), then the data. Tensors are memory-mapped and
converted to float64 exactly on demand (BF16 -> float32 by bits << 16 -> float64).
"""

import glob
import json
import os
import struct

import numpy as np

_DTYPES = {
    "BF16": (np.uint16, 2),
    "F16": (np.float16, 2),
    "F32": (np.float32, 4),
    "F64": (np.float64, 8),
    "U8": (np.uint8, 1),
    "I8": (np.int8, 1),
    "I32": (np.int32, 4),
    "I64": (np.int64, 8),
}

# docs/model-spec.md §4: E2M1 code -> value (code 8 is -0).
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float64)


class CheckpointError(Exception):
    """A checkpoint that cannot be read as the released format; the message names file and tensor."""


class _Entry:
    __slots__ = ("path", "dtype", "shape", "offset", "nbytes")

    def __init__(self, path, dtype, shape, offset, nbytes):
        self.path, self.dtype, self.shape, self.offset, self.nbytes = path, dtype, shape, offset, nbytes


def read_safetensors_header(path):
    """Returns {name: _Entry} for one shard, validating spans against the file size."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise CheckpointError(f"{path}: shorter than the 8-byte header length")
        (hlen,) = struct.unpack("<Q", head)
        if hlen == 0 or 8 + hlen > size:
            raise CheckpointError(f"{path}: header length {hlen} does not fit a file of {size} bytes")
        try:
            header = json.loads(f.read(hlen).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{path}: header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = info["dtype"]
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(v) for v in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: tensor {name}: malformed header entry") from None
        if dtype not in _DTYPES:
            raise CheckpointError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != numel * _DTYPES[dtype][1] or begin < 0:
            raise CheckpointError(f"{path}: tensor {name}: data_offsets [{begin},{end}) "
                                  f"disagree with {dtype}{list(shape)}")
        if base + end > size:
            raise CheckpointError(f"{path}: tensor {name}: ends past the end of the file")
        out[name] = _Entry(path, dtype, shape, base + begin, end - begin)
    return out


class Checkpoint:
    """All tensors of every *.safetensors shard in a directory, plus the parsed config.json."""

    def __init__(self, model_dir):
        self.model_dir = model_dir
        cfg_path = os.path.join(model_dir, "config.json")
        if not os.path.isfile(cfg_path):
            raise CheckpointError(f"{model_dir}: no config.json")
        with open(cfg_path, "r", encoding="utf-8") as f:
            try:
                self.config_json = json.load(f)
            except json.JSONDecodeError as e:
                raise CheckpointError(f"{cfg_path}: not JSON ({e})") from None
        shards = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
        if not shards:
            raise CheckpointError(f"{model_dir}: no *.safetensors shards")
        self.entries = {}
        for shard in shards:
            for name, entry in read_safetensors_header(shard).items():
                if name in self.entries:
                    raise CheckpointError(f"{shard}: tensor {name} also in {self.entries[name].path}")
                self.entries[name] = entry
        self._maps = {}

    def has(self, name):
        return name in self.entries

    def entry(self, name):
        try:
            return self.entries[name]
        except KeyError:
            raise CheckpointError(f"{self.model_dir}: missing tensor {name}") from None

    def raw(self, name):
        """The stored array (memory-mapped, read-only) in its on-disk dtype."""
        e = self.entry(name)
        np_dtype = _DTYPES[e.dtype][0]
        mm = self._maps.get(e.path)
        if mm is None:
            mm = np.memmap(e.path, dtype=np.uint8, mode="r")
            self._maps[e.path] = mm
        data = mm[e.offset:e.offset + e.nbytes].view(np.dtype(np_dtype).newbyteorder("<"))
        return data.reshape(e.shape) if e.shape else data.reshape(())

    def float64(self, name, shape=None, dtypes=None):
        """The tensor converted exactly to float64; optional shape and dtype checks."""
        e = self.entry(name)
        if dtypes is not None and e.dtype not in dtypes:
            raise CheckpointError(f"{e.path}: tensor {name}: dtype {e.dtype}, expected one of {list(dtypes)}")
        if shape is not None and tuple(shape) != e.shape:
            raise CheckpointError(f"{e.path}: tensor {name}: shape {list(e.shape)}, expected {list(shape)}")
        return to_float64(self.raw(name), e.dtype)


def to_float64(arr, dtype):
    if dtype == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype in ("U8", "I8"):
        raise CheckpointError(f"an {dtype} tensor is not a float weight")
    return np.asarray(arr).astype(np.float64)


def mxfp4_decode(packed, scale, cols=None):
    """docs/model-spec.md §4. packed U8 [R, ceil(C/2)], scale U8 [R, ceil(C/32)] -> float64 [R, C].

    `cols` (C) defaults to 2 * packed columns.

    code(r, i) = (packed[r][i/2] >> 4*(i mod 2)) & 0xF (low nibble = even column);
    value = E2M1[code] * 2^(scale[r][i/32] - 127); scale byte 255 contributes 0.
    """
    packed = np.asarray(packed, dtype=np.uint8)
    scale = np.asarray(scale, dtype=np.uint8)
    rows, half = packed.shape
    if cols is None:
        cols = 2 * half
    if half != (cols + 1) // 2 or scale.shape != (rows, (cols + 31) // 32):
        raise CheckpointError(f"MXFP4 packed {list(packed.shape)} / scale {list(scale.shape)} do not match "
                              f"{cols} columns (need [rows, ceil(cols/2)] and [rows, ceil(cols/32)])")
    codes = np.empty((rows, 2 * half), dtype=np.uint8)
    codes[:, 0::2] = packed & 0x0F
    codes[:, 1::2] = packed >> 4
    values = E2M1[codes[:, :cols]]
    exps = scale.astype(np.int32) - 127
    factor = np.ldexp(np.ones_like(exps, dtype=np.float64), exps)
    factor[scale == 255] = 0.0
    return values * np.repeat(factor, 32, axis=1)[:, :cols]
