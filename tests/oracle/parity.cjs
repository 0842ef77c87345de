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

// --- controls: the corpus must tell the PCRE2 spellings apart from naive ones ---
// The official pat_str run verbatim by PCRE2 (its \s takes U+180E; bare \p{Han} is
// Script_Extensions) must NOT reproduce the oracle, or the corpus would not be testing the
// rewrites the presets make (pretokenizer.cpp).
{
  const name = "cl100k_base";
  const rankFile = path.join(workDir, `${name}.tiktoken`);
  const officialCl100k = require(`tiktoken/encoders/${name}.json`).pat_str;
  const naiveKimi = lib.KIMI_PAT_STR
    .replace(/\[(\\p\{[^&\]]*)&&\[\^\\p\{Han\}\]\]/g, "(?:(?!\\p{Han})[$1])");
  const enc = tiktoken.get_encoding(name);
  const table = lib.readTiktokenFile(rankFile);
  const rust = new tiktoken.Tiktoken(table.npmRanks, {}, lib.KIMI_PAT_STR);
  const controls = [
    ["cl100k pat_str verbatim in PCRE2", officialCl100k, {}, (t) => Array.from(enc.encode_ordinary(t))],
    ["kimi pat_str in PCRE2 with bare \\p{Han}", naiveKimi, { max_chunk_chars: 0, max_run_chars: 0 },
      (t) => Array.from(rust.encode_ordinary(t))],
  ];
  for (const [label, pattern, extra, oracle] of controls) {
    const pipeline = writePipeline(label.replace(/[^a-z0-9]+/gi, "-"), { model: rankFile, pattern: `regex:${pattern}`, ...extra });
    const got = ours(pipeline, allLinesFile, { lines: true });
    const differing = allLines.filter((t, i) => !same(oracle(t), got[i])).length;
    console.log(`${differing ? "ok  " : "FAIL"} control "${label}": ${differing} line(s) differ from the oracle (must be > 0)`);
    if (!differing) failures++;
  }
  enc.free();
  rust.free();
}

console.log(failures ? `tokenizer parity: ${failures} comparison(s) FAILED` : "tokenizer parity: all equal");
process.exit(failures ? 1 : 0);
