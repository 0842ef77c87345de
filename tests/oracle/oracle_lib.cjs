// Independent reference pieces for the tokenizer parity test (parity.cjs). Nothing here is
// shared with the C++ plugin: it is written from the public definitions.
//  - readTiktokenFile: a tiktoken rank file -> Map(latin1 bytes -> rank), and the npm
//    `bpe_ranks` string form the WASM Tiktoken constructor takes.
//  - kimiPatternV: the official Kimi pat_str (tokenization_kimi.py of the release) as a JavaScript
//    Unicode-sets (/v) regex, which has class intersection (&&) natively.
//  - bytePairEncode: tiktoken's rank BPE, its own O(n·m) parts-vector algorithm.
//  - kimiChunks: tokenization_kimi.py's cut of the text before tiktoken (400,000 code
//    points; runs of at most 25,000 whitespace / non-whitespace code points, Python isspace).
"use strict";
const fs = require("fs");

function readTiktokenFile(file) {
  const ranks = new Map();
  const byRank = [];
  for (const line of fs.readFileSync(file, "latin1").split("\n")) {
    if (!line) continue;
    const [b64, rank] = line.split(" ");
    const r = Number(rank);
    ranks.set(Buffer.from(b64, "base64").toString("latin1"), r);
    byRank[r] = b64;
  }
  // npm form: one "! <offset> <b64> ..." line per run of consecutive ranks.
  const lines = [];
  let r = 0;
  while (r < byRank.length) {
    if (byRank[r] === undefined) { r++; continue; }
    const start = r;
    const toks = [];
    while (r < byRank.length && byRank[r] !== undefined) toks.push(byRank[r++]);
    lines.push(`! ${start} ${toks.join(" ")}`);
  }
  return { ranks, npmRanks: lines.join("\n"), end: byRank.length };
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) with Unicode simple case folding spelled out, because Node 20
// has no inline (?i:) group: every code point that /x/iu matches for each letter.
function caseClass(letter) {
  const re = new RegExp(`^${letter}$`, "iu");
  const members = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    if (re.test(c)) members.push(c);
  }
  return `[${members.join("")}]`;
}
function contractions() {
  const w = (s) => "'" + [...s].map(caseClass).join("");
  return `(?:${["s", "t", "re", "ve", "m", "ll", "d"].map(w).join("|")})`;
}

// The official pattern, alternative for alternative. \s of the Rust engine is the Unicode
// White_Space property (JS \s differs: it adds U+FEFF and lacks U+0085), and \p{Han} there is
// Script=Han, so both are written out.
let kimiRegex = null;
function kimiPatternV() {
  if (kimiRegex) return new RegExp(kimiRegex);  // a fresh lastIndex, the same compiled source
  const ws = String.raw`\p{White_Space}`;
  const han = String.raw`\p{Script=Han}`;
  const upper = String.raw`[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]&&[^${han}]]`;
  const lower = String.raw`[[\p{Ll}\p{Lm}\p{Lo}\p{M}]&&[^${han}]]`;
  const c = contractions();
  const alts = [
    String.raw`[${han}]+`,
    String.raw`[^\r\n\p{L}\p{N}]?${upper}*${lower}+${c}?`,
    String.raw`[^\r\n\p{L}\p{N}]?${upper}+${lower}*${c}?`,
    String.raw`\p{N}{1,3}`,
    String.raw` ?[^${ws}\p{L}\p{N}]+[\r\n]*`,
    String.raw`${ws}*[\r\n]+`,
    String.raw`${ws}+(?!\P{White_Space})`,
    String.raw`${ws}+`,
  ];
  kimiRegex = new RegExp(alts.join("|"), "gv");
  return new RegExp(kimiRegex);
}

// An official tiktoken pat_str (cl100k, o200k) as a JavaScript regex with the Rust engine's
// meaning: \s is White_Space and (?i:...) is spelled out.
function jsPattern(patStr) {
  const src = patStr
    .replaceAll("(?i:'s|'t|'re|'ve|'m|'ll|'d)", contractions())
    .replaceAll(String.raw`\s`, String.raw`\p{White_Space}`)
    .replaceAll(String.raw`\S`, String.raw`\P{White_Space}`);
  return new RegExp(src, "gu");  // no set operations needed; /u keeps '/' in [\r\n/] literal
}

// The pieces a /g regex cuts `text` into; text it skips is an error (the presets cover all).
function piecesOf(re, text) {
  const out = [];
  let pos = 0;
  for (const m of text.matchAll(new RegExp(re))) {
    if (m.index !== pos) throw new Error(`pattern skipped text at ${pos}`);
    out.push(m[0]);
    pos += m[0].length;
  }
  if (pos !== text.length) throw new Error("pattern skipped the end of the text");
  return out;
}

// A rank file whose tokens are the 256 bytes plus every distinct multi-byte piece, so that
// each piece encodes to exactly one id (tiktoken looks a whole piece up before merging) and
// ids show the pre-tokenizer's cuts exactly. Returns the file text and the rank map.
function pieceTable(pieces) {
  const ranks = new Map();
  const lines = [];
  for (let b = 0; b < 256; b++) {
    ranks.set(String.fromCharCode(b), b);
    lines.push(`${Buffer.from([b]).toString("base64")} ${b}`);
  }
  for (const p of pieces) {
    const bytes = Buffer.from(p, "utf8");
    const key = bytes.toString("latin1");
    if (ranks.has(key)) continue;
    ranks.set(key, ranks.size);
    lines.push(`${bytes.toString("base64")} ${ranks.size - 1}`);
  }
  return { text: lines.join("\n") + "\n", ranks };
}

// The official Kimi pat_str exactly as tokenization_kimi.py writes it (Rust regex syntax),
// for the WASM build of tiktoken.
const KIMI_PAT_STR = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
].join("|");

// tiktoken's _byte_pair_merge (src/lib.rs) on a latin1 string of bytes: parts[i] = [start,
// rank of the pair starting there]; merge the minimum (first on ties), re-rank the two
// neighbours, repeat.
function bytePairEncode(ranks, piece) {
  const whole = ranks.get(piece);
  if (whole !== undefined) return [whole];
  const NONE = Infinity;
  const parts = [];
  for (let i = 0; i + 1 < piece.length; i++) parts.push([i, ranks.get(piece.slice(i, i + 2)) ?? NONE]);
  parts.push([piece.length - 1, NONE], [piece.length, NONE]);
  const rankAt = (i) => (i + 3 < parts.length ? ranks.get(piece.slice(parts[i][0], parts[i + 3][0])) ?? NONE : NONE);
  for (;;) {
    let best = NONE, at = -1;
    for (let i = 0; i + 1 < parts.length; i++) if (parts[i][1] < best) { best = parts[i][1]; at = i; }
    if (at < 0) break;
    if (at > 0) parts[at - 1][1] = rankAt(at - 1);
    parts[at][1] = rankAt(at);
    parts.splice(at + 1, 1);
  }
  const out = [];
  for (let i = 0; i + 1 < parts.length; i++) {
    const r = ranks.get(piece.slice(parts[i][0], parts[i + 1][0]));
    if (r === undefined) throw new Error(`byte without rank in piece ${JSON.stringify(piece)}`);
    out.push(r);
  }
  return out;
}

// Python str.isspace() for one code point.
function pyIsSpace(cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp === 0x85 || cp === 0xa0 ||
    cp === 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp === 0x2028 || cp === 0x2029 || cp === 0x202f ||
    cp === 0x205f || cp === 0x3000;
}

function splitRuns(cps, maxRun) {
  if (cps.length === 0) return [];
  if (!maxRun) return [cps];
  const out = [];
  let len = 0, isSpace = pyIsSpace(cps[0]), start = 0;
  for (let i = 0; i < cps.length; i++) {
    const now = pyIsSpace(cps[i]);
    if (isSpace !== now) { len = 1; isSpace = now; }
    else if (++len > maxRun) { out.push(cps.slice(start, i)); start = i; len = 1; }
  }
  out.push(cps.slice(start));
  return out;
}

// Substrings (JS strings) as tokenization_kimi.py hands them to tiktoken.
function kimiChunks(text, maxChunk, maxRun) {
  const cps = Array.from(text, (c) => c.codePointAt(0));
  const out = [];
  const step = maxChunk || Math.max(cps.length, 1);
  for (let i = 0; i < cps.length; i += step)
    for (const run of splitRuns(cps.slice(i, i + step), maxRun)) out.push(String.fromCodePoint(...run));
  return out;
}

// The Kimi pipeline in JS: chunks, /v regex pieces, rank BPE.
function kimiEncodeJs(ranks, text, maxChunk, maxRun) {
  const ids = [];
  const re = kimiPatternV();
  for (const chunk of kimiChunks(text, maxChunk, maxRun)) {
    let pos = 0;
    for (const m of chunk.matchAll(re)) {
      if (m.index !== pos) throw new Error(`kimi /v pattern skipped text at ${pos}`);
      pos = m.index + m[0].length;
      ids.push(...bytePairEncode(ranks, Buffer.from(m[0], "utf8").toString("latin1")));
    }
    if (pos !== chunk.length) throw new Error("kimi /v pattern skipped the end of a chunk");
  }
  return ids;
}

module.exports = { readTiktokenFile, kimiPatternV, jsPattern, piecesOf, pieceTable, KIMI_PAT_STR, bytePairEncode, kimiChunks, kimiEncodeJs };
