// Tokenizer parity: k3host's tiktoken plugin against the real npm tokenizers.
//
//   node parity.cjs K3HOST WORKDIR CORPUS_DIR
//
// cl100k / o200k: ids must equal npm `tiktoken` (OpenAI's Rust core compiled to WASM, with its
//   own regex engine) for every corpus line and every whole corpus file, with special tokens
//   off and on. npm `js-tiktoken` (JavaScript regex) is compared too and its disagreements
//   with the Rust core are reported, not gated: JS \s differs from Rust's on U+0085 / U+FEFF.
// kimi: the official Kimi pattern (class intersections, lookahead) over the cl100k and o200k
//   rank tables, against two oracles that must both agree with us: (a) npm tiktoken's Rust
//   regex engine running the official pat_str verbatim, (b) Node's Unicode-sets (/v) regex
//   plus a JavaScript rank BPE (oracle_lib.cjs). Both apply Kimi's text cuts; a run with tiny
//   cut limits checks the cut logic itself.
// Exit 0 all equal, 1 a mismatch (the first ones are printed), 2 a usage or setup error.
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");
const lib = require("./oracle_lib.cjs");

const [k3host, workDir, corpusDir] = process.argv.slice(2);
if (!k3host || !workDir || !corpusDir) {
  console.error("usage: node parity.cjs K3HOST WORKDIR CORPUS_DIR");
  process.exit(2);
}
const tiktoken = require("tiktoken");
const jsTiktoken = require("js-tiktoken");

fs.mkdirSync(workDir, { recursive: true });
execFileSync(process.execPath, [path.join(__dirname, "make_ranks.cjs"), workDir], { stdio: "inherit" });

const corpusFiles = fs.readdirSync(corpusDir).filter((f) => f.endsWith(".txt")).sort()
  .map((f) => path.join(corpusDir, f));
// All lines of all files, one per line: the --lines run covers the whole corpus at once.
const allLinesFile = path.join(workDir, "corpus-all.txt");
fs.writeFileSync(allLinesFile, corpusFiles.map((f) => fs.readFileSync(f, "utf8").replace(/\n$/, "")).join("\n") + "\n");
const allLines = fs.readFileSync(allLinesFile, "utf8").replace(/\n$/, "").split("\n");

function specialsParam(name) {
  const table = require(`tiktoken/encoders/${name}.json`).special_tokens;
  return Object.entries(table).map(([t, id]) => `${t}=${id}`).join(",");
}

function writePipeline(name, params) {
  const file = path.join(workDir, `${name}.yaml`);
  const body = ["tokenizer:", "  plugin: tiktoken", "  params:"]
    .concat(Object.entries(params).map(([k, v]) => `    ${k}: ${JSON.stringify(String(v))}`)).join("\n") + "\n";
  fs.writeFileSync(file + ".tmp", body);
  fs.renameSync(file + ".tmp", file);
  return file;
}

function ours(pipeline, file, { lines = false, special = false } = {}) {
  const args = ["--config", pipeline, "tokenize", "--file", file];
  if (lines) args.push("--lines");
  if (special) args.push("--special");
  const out = execFileSync(k3host, args, { maxBuffer: 1 << 28, encoding: "utf8" });
  return out.replace(/\n$/, "").split("\n").map((l) => (l === "" ? [] : l.split(" ").map(Number)));
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
let failures = 0;
function compare(label, texts, expected, got) {
  let bad = 0;
  if (expected.length !== got.length) {
    console.log(`FAIL ${label}: ${expected.length} units expected, k3host printed ${got.length}`);
    failures++;
    return;
  }
  for (let i = 0; i < expected.length; i++) {
    if (same(expected[i], got[i])) continue;
    if (bad++ < 3) {
      let d = 0;
      while (d < expected[i].length && expected[i][d] === got[i][d]) d++;
      console.log(`FAIL ${label} unit ${i + 1}: ${JSON.stringify(texts[i].slice(0, 120))}`);
      console.log(`  first difference at id ${d}: expected ${JSON.stringify(expected[i].slice(d, d + 8))}, ` +
        `k3host ${JSON.stringify(got[i].slice(d, d + 8))}`);
    }
  }
  if (bad) failures++;
  const ids = expected.reduce((n, e) => n + e.length, 0);
  console.log(`${bad ? "FAIL" : "ok  "} ${label}: ${expected.length - bad}/${expected.length} equal (${ids} ids)`);
}

// --- cl100k and o200k against npm tiktoken (gate) and js-tiktoken (reported) ---
for (const [name, preset] of [["cl100k_base", "cl100k"], ["o200k_base", "o200k"]]) {
  const rankFile = path.join(workDir, `${name}.tiktoken`);
  const pipeline = writePipeline(preset, { model: rankFile, pattern: preset, specials: specialsParam(name) });
  const enc = tiktoken.get_encoding(name);
  const js = jsTiktoken.getEncoding(name);
  const ordinary = (t) => Array.from(enc.encode_ordinary(t));

  const expected = allLines.map(ordinary);
  compare(`${preset} lines`, allLines, expected, ours(pipeline, allLinesFile, { lines: true }));
  let jsDiff = 0;
  allLines.forEach((t, i) => { if (!same(js.encode(t, [], []), expected[i])) jsDiff++; });
  console.log(`     js-tiktoken ${name}: ${allLines.length - jsDiff}/${allLines.length} lines equal to tiktoken` +
    (jsDiff ? " (the rest: JavaScript regex semantics, not gated)" : ""));

  const texts = corpusFiles.map((f) => fs.readFileSync(f, "utf8"));
  compare(`${preset} whole files`, texts, texts.map(ordinary), corpusFiles.map((f) => ours(pipeline, f)[0]));

  const specialFile = path.join(corpusDir, "specials.txt");
  const specialLines = fs.readFileSync(specialFile, "utf8").replace(/\n$/, "").split("\n");
  compare(`${preset} lines, special tokens on`, specialLines,
    specialLines.map((t) => Array.from(enc.encode(t, "all"))), ours(pipeline, specialFile, { lines: true, special: true }));
  enc.free();
}

// --- kimi pattern over public rank tables, against Rust regex (WASM) and JS /v regex ---
const KIMI_CUTS = { max_chunk_chars: 400000, max_run_chars: 25000 };
const kimiRuns = [
  ["kimi@cl100k", "cl100k_base", KIMI_CUTS],
  ["kimi@o200k", "o200k_base", KIMI_CUTS],
  ["kimi@cl100k tiny cuts", "cl100k_base", { max_chunk_chars: 50, max_run_chars: 7 }],
];
for (const [label, name, cuts] of kimiRuns) {
  const rankFile = path.join(workDir, `${name}.tiktoken`);
  const table = lib.readTiktokenFile(rankFile);
  const pipeline = writePipeline(label.replace(/[^a-z0-9]+/gi, "-"), {
    model: rankFile, pattern: "kimi", max_chunk_chars: cuts.max_chunk_chars, max_run_chars: cuts.max_run_chars });
  const rust = new tiktoken.Tiktoken(table.npmRanks, {}, lib.KIMI_PAT_STR);
  const viaRust = (t) => lib.kimiChunks(t, cuts.max_chunk_chars, cuts.max_run_chars)
    .flatMap((c) => Array.from(rust.encode_ordinary(c)));
  const viaJs = (t) => lib.kimiEncodeJs(table.ranks, t, cuts.max_chunk_chars, cuts.max_run_chars);

  const expected = allLines.map(viaRust);
  const js = allLines.map(viaJs);
  compare(`${label} lines vs Rust regex`, allLines, expected, ours(pipeline, allLinesFile, { lines: true }));
  compare(`${label} lines vs JS /v regex`, allLines, js, ours(pipeline, allLinesFile, { lines: true }));
  const texts = corpusFiles.map((f) => fs.readFileSync(f, "utf8"));
  const whole = corpusFiles.map((f) => ours(pipeline, f)[0]);
  compare(`${label} whole files vs Rust regex`, texts, texts.map(viaRust), whole);
  compare(`${label} whole files vs JS /v regex`, texts, texts.map(viaJs), whole);
  rust.free();
}

// --- pre-tokenization, exactly: piece tables ---
// A rank file holding every piece the JavaScript regex cuts from the corpus makes each
// piece one id, so equal ids mean equal cuts (real rank tables hide a cut wherever no merge
// spans it). Our ids must equal those of the Rust engine (WASM) on the same table, and of
// the JS regex; for Kimi the Rust engine runs the official pat_str with its &&.
// Controls: PCRE2 running the official pat_str verbatim (its \s takes U+180E; a bare
// \p{Han} means Script_Extensions there) must NOT match, or the corpus would not be testing
// the rewrites the presets make (pretokenizer.cpp).
const naiveKimi = lib.KIMI_PAT_STR
  .replace(/\[(\\p\{[^&\]]*)&&\[\^\\p\{Han\}\]\]/g, "(?:(?!\\p{Han})[$1])");
const pieceRuns = [
  { label: "cl100k", pattern: "cl100k", patStr: require("tiktoken/encoders/cl100k_base.json").pat_str },
  { label: "o200k", pattern: "o200k", patStr: require("tiktoken/encoders/o200k_base.json").pat_str },
  { label: "kimi", pattern: "kimi", patStr: lib.KIMI_PAT_STR, kimi: true },
];
for (const run of pieceRuns) {
  const re = run.kimi ? lib.kimiPatternV() : lib.jsPattern(run.patStr);
  const cut = (t) => (run.kimi ? lib.kimiChunks(t, KIMI_CUTS.max_chunk_chars, KIMI_CUTS.max_run_chars) : [t]);
  const jsPieces = (t) => cut(t).flatMap((c) => lib.piecesOf(re, c));
  const texts = corpusFiles.map((f) => fs.readFileSync(f, "utf8"));
  const table = lib.pieceTable(allLines.concat(texts).flatMap(jsPieces));
  const tableFile = path.join(workDir, `pieces-${run.label}.tiktoken`);
  fs.writeFileSync(tableFile + ".tmp", table.text);
  fs.renameSync(tableFile + ".tmp", tableFile);
  const npm = lib.readTiktokenFile(tableFile);
  const rust = new tiktoken.Tiktoken(npm.npmRanks, {}, run.patStr);
  const viaRust = (t) => cut(t).flatMap((c) => Array.from(rust.encode_ordinary(c)));
  const viaJs = (t) => jsPieces(t).map((p) => table.ranks.get(Buffer.from(p, "utf8").toString("latin1")));
  const pipeline = writePipeline(`pieces-${run.label}`, { model: tableFile, pattern: run.pattern });
  const got = ours(pipeline, allLinesFile, { lines: true });
  compare(`${run.label} pieces, lines vs Rust regex`, allLines, allLines.map(viaRust), got);
  compare(`${run.label} pieces, lines vs JS regex`, allLines, allLines.map(viaJs), got);
  compare(`${run.label} pieces, whole files vs Rust regex`, texts, texts.map(viaRust), corpusFiles.map((f) => ours(pipeline, f)[0]));

  const naive = run.kimi ? naiveKimi : run.patStr;
  const control = writePipeline(`pieces-${run.label}-naive`, {
    model: tableFile, pattern: `regex:${naive}`, ...(run.kimi ? KIMI_CUTS : {}) });
  const wrong = ours(control, allLinesFile, { lines: true });
  const differing = allLines.filter((t, i) => !same(viaRust(t), wrong[i])).length;
  console.log(`${differing ? "ok  " : "FAIL"} control: ${run.label} pat_str run verbatim by PCRE2 differs on ${differing} line(s) (must be > 0)`);
  if (!differing) failures++;
  rust.free();
}

console.log(failures ? `tokenizer parity: ${failures} comparison(s) FAILED` : "tokenizer parity: all equal");
process.exit(failures ? 1 : 0);
