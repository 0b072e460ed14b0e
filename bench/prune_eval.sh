#!/usr/bin/env bash
# Expert pruning, measured: the default model pruned to 75 %, 50 % and 25 % of
# its routed experts by each rule (usage, spectral, usage+spectral, and the
# random-drop baseline with the same count), each evaluated like the
# unpruned model (STS-B test, Cranfield, Banking77: HS, RW and fused) and
# costed (weights bytes, peak RSS and tokens/s of `moeedb embed` over the
# same 400 texts). Calibration texts for the usage rules: STS-B *train*
# sentences (the test split stays unseen). Prints the CPU flags, writes
# OUT/results.jsonl and the table OUT/prune.md.
#
#   bench/prune_eval.sh [MODEL_DIR] [EVAL_DATA_DIR] [OUT_DIR]
#   defaults:            models/moeedb-tiny  ../shared/data/eval  build/prune
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
MODEL="${1:-models/moeedb-tiny}"
DATA="${2:-../shared/data/eval}"
OUT="${3:-build/prune}"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 -o -w -E 'avx512f|avx512_bf16|avx512_vnni|avx2|avx_vnni' /proc/cpuinfo | sort -u | xargs)" >&2
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
# 1200 calibration sentences and 400 costing texts from STS-B train.
node -e '
const fs = require("fs");
const lines = fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean);
const out = [];
for (const l of lines) {  // sentence1,sentence2,score with CSV quoting
  const cells = []; let cur = "", q = false;
  for (let i = 0; i < l.length; i++) {
    const ch = l[i];
    if (q) { if (ch === "\"" && l[i + 1] === "\"") { cur += "\""; i++; } else if (ch === "\"") q = false; else cur += ch; }
    else if (ch === "\"") q = true; else if (ch === ",") { cells.push(cur); cur = ""; } else cur += ch;
  }
  cells.push(cur);
  out.push(cells[0], cells[1]);
}
fs.writeFileSync(process.argv[2], out.slice(0, 1200).join("\n") + "\n");
fs.writeFileSync(process.argv[3], out.slice(1200, 1600).join("\n") + "\n");
' "$DATA/stsb/stsb-en-train.csv" "$OUT/calib.txt" "$OUT/cost.txt"

measure() {  # label, model dir
  local label="$1" dir="$2"
  local bytes rss tps
  bytes=$(stat -c %s "$dir"/*.safetensors | awk '{s += $1} END {print s}')
  /usr/bin/time -f 'peak_rss_kb %M' -o "$OUT/time.txt" "$BIN" embed --model "$dir" --stats < "$OUT/cost.txt" > /dev/null 2> "$OUT/embed.err"
  rss=$(awk '/peak_rss_kb/ {print $2}' "$OUT/time.txt")
  tps=$(grep -o '[0-9.]* tokens/s' "$OUT/embed.err" | cut -d' ' -f1)
  local sts ret cls
  sts=$("$BIN" eval sts --model "$dir" --data "$DATA/stsb" 2>/dev/null)
  ret=$("$BIN" eval retrieval --model "$dir" --data "$DATA/cranfield" 2>/dev/null)
  cls=$("$BIN" eval classify --model "$dir" --data "$DATA/banking77" 2>/dev/null)
  node -e '
const [label, bytes, rss, tps, sts, ret, cls] = process.argv.slice(1);
const s = JSON.parse(sts), r = JSON.parse(ret), c = JSON.parse(cls);
console.log(JSON.stringify({ label, weights_bytes: Number(bytes), peak_rss_kb: Number(rss), tokens_per_s: Number(tps),
  sts: s, retrieval: r, classify: c }));
' "$label" "$bytes" "$rss" "$tps" "$sts" "$ret" "$cls" >> "$OUT/results.jsonl"
  echo "$label done" >&2
}

measure "unpruned" "$MODEL"
for keep in 0.75 0.5 0.25; do
  for rule in usage spectral usage+spectral random; do
    dir="$OUT/keep${keep}-${rule}"
    rm -rf "$dir"
    "$BIN" model prune --model "$MODEL" --keep "$keep" --by "$rule" --calib "$OUT/calib.txt" --out "$dir" > "$dir.json"
    measure "keep${keep}-${rule}" "$dir"
  done
done
node bench/prune_table.mjs "$OUT/results.jsonl" > "$OUT/prune.md"
cat "$OUT/prune.md"
