#!/usr/bin/env bash
# The embedded default beside all-MiniLM-L6-v2 (Chroma's default embedder,
# run as Chroma runs it: onnxruntime on the CPU; eval/teacher/minilm.py) on
# the same texts with THREADS threads: texts/s and tokens/s of each, ROUNDS
# interleaved rounds, the medians and moeedb / MiniLM. moeedb runs
# `moeedb embed --stats` in f32, bf16 and int8 with its default flags
# otherwise. Texts: every STRIDE-th text the evaluation tasks embed (`moeedb
# eval texts`: STS-B sentences, Banking77 queries, Cranfield abstracts and
# queries), one a line. Each model counts its own tokenizer's tokens
# (WordPiece with [CLS]/[SEP] against moeedb's byte-level BPE), so texts/s
# is the like-for-like figure; both are printed.
#
# MODELS is one model folder or several, comma-separated: each runs in every
# round beside MiniLM, its rows named after its folder.
#
# Usage: bash bench/default_vs_minilm.sh [ROUNDS=2] [THREADS=2] [STRIDE=10] [MODELS=models/moeedb-tiny]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
ROUNDS="${1:-2}"; THREADS="${2:-2}"; STRIDE="${3:-10}"; MODELS="${4:-models/moeedb-tiny}"
IFS=, read -r -a MODEL_LIST <<< "$MODELS"
DATA="${MOEEDB_EVAL_DATA:-../shared/data/eval}"
[ -d "$DATA" ] || DATA=tests/data/eval
WORK=build/bench-minilm
mkdir -p "$WORK"
PY="$(bash scripts/python_env.sh teacher)"
"$BIN" eval texts --data "$DATA" | awk -v s="$STRIDE" '(NR - 1) % s == 0' > "$WORK/texts.jsonl"
# One text a line for MiniLM's reader (a newline inside a text becomes a space).
"$PY" -c 'import json,sys; [print(json.loads(l)["text"].replace("\n", " ")) for l in sys.stdin]' < "$WORK/texts.jsonl" > "$WORK/texts.txt"
N="$(wc -l < "$WORK/texts.txt")"
echo "texts: $N (every ${STRIDE}th of $DATA's evaluation texts); threads: $THREADS; models: $MODELS"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512.*|avx_vnni|amx.*)$' | tr '\n' ' ')"

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
: > "$WORK/rounds.tsv"
for round in $(seq 1 "$ROUNDS"); do
  m="$("$PY" eval/teacher/minilm.py speed "$WORK/texts.txt" --texts "$N" --threads "$THREADS" --rounds 1)"
  tps="$(echo "$m" | "$PY" -c 'import json,sys; j=json.load(sys.stdin); print(j["texts_per_s"], j["tokens_per_s"])')"
  echo -e "minilm\t$round\t${tps% *}\t${tps#* }" >> "$WORK/rounds.tsv"
  for model in "${MODEL_LIST[@]}"; do
    for fmt in f32 bf16 int8; do
      flags=(--dtype f32); [ "$fmt" = bf16 ] && flags=(--dtype bf16); [ "$fmt" = int8 ] && flags=(--quant int8)
      # --stats prints "embed: N texts, T tokens in S s: X texts/s, Y tokens/s" (model load excluded).
      line="$("$BIN" embed --model "$model" --threads "$THREADS" "${flags[@]}" --stats < "$WORK/texts.txt" 2>&1 >/dev/null | grep -E 'texts/s' | tail -1)"
      texts_s="$(echo "$line" | grep -oE '[0-9.]+ texts/s' | cut -d' ' -f1)"
      tokens_s="$(echo "$line" | grep -oE '[0-9.]+ tokens/s' | cut -d' ' -f1)"
      echo -e "$(basename "$model")-$fmt\t$round\t$texts_s\t$tokens_s" >> "$WORK/rounds.tsv"
    done
  done
done
echo
printf "%-24s %-28s %-30s %-18s %s\n" "run" "texts/s (rounds; median)" "tokens/s (rounds; median)" "texts/s vs MiniLM" "tokens/s vs MiniLM"
base="$(awk '$1 == "minilm" { print $3 }' "$WORK/rounds.tsv" | median)"
base_k="$(awk '$1 == "minilm" { print $4 }' "$WORK/rounds.tsv" | median)"
for run in $(cut -f1 "$WORK/rounds.tsv" | awk '!seen[$0]++'); do
  t="$(awk -v r="$run" '$1 == r { print $3 }' "$WORK/rounds.tsv")"; k="$(awk -v r="$run" '$1 == r { print $4 }' "$WORK/rounds.tsv")"
  tm="$(echo "$t" | median)"; km="$(echo "$k" | median)"
  printf "%-24s %-28s %-30s %-18s %.2fx\n" "$run" "$(echo $t | tr ' ' ',') ; $tm" "$(echo $k | tr ' ' ',') ; $km" \
    "$(echo "$tm $base" | awk '{ printf "%.2fx", $1 / $2 }')" "$(echo "$km $base_k" | awk '{ print $1 / $2 }')"
done
