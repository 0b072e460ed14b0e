#!/usr/bin/env bash
# What moeedb's choice of OpenBLAS kernels is worth (base/blas_core.h:
# where OpenBLAS 0.3.21 takes a CPU model newer than its table for Prescott,
# moeedb selects the kernels the CPU's features call for). Each round runs,
# interleaved, the library's fallback (OPENBLAS_CORETYPE=Prescott) and
# moeedb's selection (no variable; on a CPU OpenBLAS knows, its own choice):
#   train: `moeedb train embed` from the default model, STEPS steps of the
#          default recipe's pair and STS-B terms (2 threads): sentences/s;
#   embed: `moeedb embed --stats` of every 4th evaluation text, f32 and bf16
#          (attention's products are at::matmul): texts/s.
# Prints each run, the medians and selected / Prescott, the CPU flags and
# the BLAS line each run printed.
#
# Usage: bash bench/blas_core.sh [ROUNDS=2] [STEPS=30] [MODEL=models/moeedb-tiny]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
ROUNDS="${1:-2}"; STEPS="${2:-30}"; MODEL="${3:-models/moeedb-tiny}"
DATA="${MOEEDB_DATA:-../shared/data}"
[ -d "$DATA/pairs" ] || { echo "blas_core: needs the training pairs in $DATA (MOEEDB_DATA)" >&2; exit 2; }
WORK=build/bench-blas-core
rm -rf "$WORK" && mkdir -p "$WORK"
"$BIN" eval texts --data "$DATA/eval" | awk '(NR - 1) % 4 == 0' |
  python3 -c 'import json,sys; [print(json.loads(l)["text"].replace("\n", " ")) for l in sys.stdin]' > "$WORK/texts.txt"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_bf16|avx512_vnni|amx_bf16)$' | xargs)"
echo "texts: $(wc -l < "$WORK/texts.txt") (every 4th evaluation text); train: $STEPS steps; model: $MODEL"

run() {  # kind: prescott | selected; then the command
  local kind="$1"; shift
  if [ "$kind" = prescott ]; then OPENBLAS_CORETYPE=Prescott "$@"; else env -u OPENBLAS_CORETYPE "$@"; fi
}
: > "$WORK/rounds.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for kind in prescott selected; do
    out="$WORK/train-$kind-$round"
    run "$kind" "$BIN" train embed --model "$MODEL" --out "$out" \
      --pairs "$DATA/pairs/nli_triplets.tsv,$DATA/pairs/positive_pairs.tsv" --scored "$DATA/eval/stsb/stsb-en-train.csv" \
      --token-pooling weighted --bidirectional --lexical-dim 512 --threads 2 --steps 1000 --stop-after "$STEPS" \
      --warmup-steps 10 --seed 1 --max-tokens 128 > "$out.log" 2>&1 || [ $? -eq 3 ]
    [ "$round" = 1 ] && echo "train, $kind: $(grep -o 'BLAS: .*' "$out.log")"
    echo -e "train\t$kind\t$(grep -oE '[0-9.]+ sentences/s' "$out.log" | tail -1 | cut -d' ' -f1)" >> "$WORK/rounds.tsv"
    for fmt in f32 bf16; do
      line="$(run "$kind" "$BIN" embed --model "$MODEL" --threads 2 --dtype "$fmt" --stats < "$WORK/texts.txt" 2>&1 >/dev/null)"
      [ "$round" = 1 ] && [ "$fmt" = f32 ] && echo "embed, $kind: $(echo "$line" | grep -o 'BLAS: .*')"
      echo -e "embed-$fmt\t$kind\t$(echo "$line" | grep -oE '[0-9.]+ texts/s' | cut -d' ' -f1)" >> "$WORK/rounds.tsv"
    done
  done
done
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo
printf "%-11s %-26s %-26s %s\n" "run" "Prescott (rounds; median)" "selected (rounds; median)" "selected / Prescott"
for what in train embed-f32 embed-bf16; do
  p="$(awk -v w="$what" '$1 == w && $2 == "prescott" { print $3 }' "$WORK/rounds.tsv")"
  s="$(awk -v w="$what" '$1 == w && $2 == "selected" { print $3 }' "$WORK/rounds.tsv")"
  pm="$(echo "$p" | median)"; sm="$(echo "$s" | median)"
  printf "%-11s %-26s %-26s %.2fx\n" "$what" "$(echo $p | tr ' ' ',') ; $pm" "$(echo $s | tr ' ' ',') ; $sm" "$(echo "$sm $pm" | awk '{ print $1 / $2 }')"
done
echo "(train: sentences/s; embed: texts/s)"
