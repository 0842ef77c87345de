"""Byte-level BPE in the tiktoken rank-file form K3 uses (plugins/tokenizers/tiktoken/README.md).

- `pretokenize(text)`: the official Kimi pre-tokenizer pattern (the engine's `pattern: kimi`),
  written for Python's `regex` module the same way pretokenizer.cpp writes it for PCRE2.
- `train(text, ranks)`: ranks 0..255 are the single bytes; each further rank is the most
  frequent adjacent pair inside the pre-tokenized pieces, merged (ties: the pair that sorts first).
- `Encoder(tokens).encode(text)`: tiktoken's rule (repeatedly merge the adjacent pair whose
  concatenation has the lowest rank, leftmost on ties), after Kimi's two cuts (pieces of at
  most 400,000 code points, then no whitespace or non-whitespace run over 25,000; the engine's
  `pattern: kimi` defaults, plugins/tokenizers/tiktoken/README.md), so the ids equal the engine's.
"""

import base64
import collections
import heapq

import regex

# Kimi's pat_str. \s is spelled \p{White_Space} and \p{Han} the script (sc=Han) exactly as
# plugins/tokenizers/tiktoken/pretokenizer.cpp does for PCRE2, so the two engines cut alike.
_WS, _NWS = r"\p{White_Space}", r"\P{White_Space}"
_CONTR = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_UP = r"(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])"
_LO = r"(?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])"
KIMI_PATTERN = (r"\p{sc=Han}+"
                r"|[^\r\n\p{L}\p{N}]?" + _UP + "*" + _LO + "+" + _CONTR + "?"
                r"|[^\r\n\p{L}\p{N}]?" + _UP + "+" + _LO + "*" + _CONTR + "?"
                r"|\p{N}{1,3}"
                r"| ?[^" + _WS + r"\p{L}\p{N}]+[\r\n]*"
                r"|" + _WS + r"*[\r\n]+"
                r"|" + _WS + "+(?!" + _NWS + ")"
                r"|" + _WS + "+")
_RE = regex.compile(KIMI_PATTERN)


def pretokenize(text):
    return _RE.findall(text)


def train(text, ranks):
    """Returns the token byte strings in rank order (len == ranks, or fewer if the text runs out)."""
    counts = collections.Counter(p.encode("utf-8") for p in pretokenize(text))
    words = [list(w) for w in counts]             # each word as a list of token ids
    freq = [counts[bytes(w)] for w in words]
    tokens = [bytes([b]) for b in range(256)]
    index = {t: i for i, t in enumerate(tokens)}
    pair_count = collections.Counter()
    where = collections.defaultdict(set)           # pair -> ids of the words containing it
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += freq[wi]
            where[(a, b)].add(wi)
    # Max-heap of (-count, pair bytes, pair); stale entries are skipped when popped.
    heap = [(-c, tokens[a] + b"\0" + tokens[b], (a, b)) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    while len(tokens) < ranks and heap:
        negc, _, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue
        merged = tokens[pair[0]] + tokens[pair[1]]
        new = index.get(merged)
        if new is None:                            # the same bytes reached by another split
            new = len(tokens)
            tokens.append(merged)
            index[merged] = new
        touched = collections.Counter()
        for wi in list(where[pair]):
            w, f = words[wi], freq[wi]
            for a, b in zip(w, w[1:]):
                pair_count[(a, b)] -= f
                touched[(a, b)] += 0
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] += f
                where[(a, b)].add(wi)
                touched[(a, b)] += 0
        for p in touched:
            c = pair_count[p]
            if c > 0:
                heapq.heappush(heap, (-c, tokens[p[0]] + b"\0" + tokens[p[1]], p))
            else:
                pair_count.pop(p, None)
                where.pop(p, None)
    return tokens


MAX_CHUNK_CHARS = 400_000
MAX_RUN_CHARS = 25_000


def kimi_cut(text, chunk=MAX_CHUNK_CHARS, run=MAX_RUN_CHARS):
    """Kimi's pieces: fixed chunks of `chunk` code points, each cut again wherever a run of
    whitespace (str.isspace) or of non-whitespace would exceed `run` code points. Each piece
    is pre-tokenized and encoded on its own (so a cut can split a word)."""
    out = []
    for c0 in range(0, len(text), chunk):
        part = text[c0:c0 + chunk]
        start, length, space = 0, 0, part[:1].isspace()
        for i, ch in enumerate(part):
            if ch.isspace() != space:
                space, length = ch.isspace(), 1
            else:
                length += 1
                if length > run:
                    out.append(part[start:i])
                    start, length = i, 1
        out.append(part[start:])
    return [p for p in out if p]


class Encoder:
    def __init__(self, tokens):
        self.tokens = list(tokens)
        self.rank = {t: i for i, t in enumerate(self.tokens)}
        self._cache = {}

    def _bpe(self, piece):
        r = self.rank.get(piece)
        if r is not None:
            return [r]
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                rr = self.rank.get(parts[i] + parts[i + 1])
                if rr is not None and (best is None or rr < best):
                    best, at = rr, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        return [self.rank[p] for p in parts]

    def encode(self, text, kimi_cuts=True):
        if not kimi_cuts:
            return self._encode_piece(text)
        ids = []
        for piece in kimi_cut(text):
            ids += self._encode_piece(piece)
        return ids

    def _encode_piece(self, text):
        ids = []
        for p in pretokenize(text):
            got = self._cache.get(p)
            if got is None:
                got = self._cache[p] = self._bpe(p.encode("utf-8"))
            ids += got
        return ids

    def decode(self, ids):
        return b"".join(self.tokens[i] for i in ids if i < len(self.tokens)).decode("utf-8", "replace")


def write_rank_file(tokens, path):
    """One '<base64 token> <rank>' per line, the format of tiktoken.model."""
    with open(path, "w") as f:
        for r, t in enumerate(tokens):
            f.write(f"{base64.b64encode(t).decode('ascii')} {r}\n")


def read_rank_file(path):
    tokens = []
    with open(path) as f:
        for n, line in enumerate(f):
            b64, r = line.split()
            if int(r) != n:
                raise ValueError(f"{path}:{n + 1}: rank {r} out of order")
            tokens.append(base64.b64decode(b64))
    return tokens
