// Writes the official tiktoken rank files cl100k_base.tiktoken and o200k_base.tiktoken
// ("<base64 token> <rank>" per line) from the tables the npm package `tiktoken` ships in
// node_modules/tiktoken/encoders/<name>.json, whose `bpe_ranks` holds lines
// "<marker> <offset> <b64> <b64> ..." where token i of a line has rank offset + i
// (the layout of the npm package tiktoken). The result is byte-identical to OpenAI's files; the sha256 is
// printed so it can be checked.
//
// Usage: node make_ranks.cjs OUTDIR          (files are written to a temporary name, renamed)
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");

const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: node make_ranks.cjs OUTDIR");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
for (const name of ["cl100k_base", "o200k_base"]) {
  const table = require(path.join(__dirname, "node_modules", "tiktoken", "encoders", `${name}.json`));
  const lines = [];
  for (const line of table.bpe_ranks.split("\n").filter(Boolean)) {
    const [, offset, ...tokens] = line.split(" ");
    tokens.forEach((t, i) => lines.push(`${t} ${Number(offset) + i}`));
  }
  const buf = Buffer.from(lines.join("\n") + "\n");
  const file = path.join(outDir, `${name}.tiktoken`);
  fs.writeFileSync(file + ".tmp", buf);
  fs.renameSync(file + ".tmp", file);
  const sha = crypto.createHash("sha256").update(buf).digest("hex");
  console.log(`${name}: ${lines.length} ranks, ${buf.length} bytes, sha256 ${sha}`);
}
