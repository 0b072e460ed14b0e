#!/usr/bin/env bash
# MoE Lens specialisation of a model over the domains the data folder has:
# which experts each domain's tokens are routed to, against the uniform
# baseline top_k / E. Builds 400 texts per domain (lines of 40-300
# characters) from ../shared/data, runs `moeedb lens specialise`, writes
# OUT/specialisation.json, OUT/layer-N.png and the table OUT/lens.md.
#
#   bench/lens_specialise.sh [MODEL_DIR] [DATA_DIR] [OUT_DIR]
#   defaults:                models/moeedb-tiny  ../shared/data  build/lens
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
MODEL="${1:-models/moeedb-tiny}"
DATA="${2:-../shared/data}"
OUT="${3:-build/lens}"
mkdir -p "$OUT/domains"
node - "$DATA" "$OUT/domains" <<'EOF'
const fs = require('fs');
const [data, out] = process.argv.slice(2);
// Lines of 40-300 characters: paragraphs cut at sentence ends.
function lines(text, n, skip = 0) {
  const res = [];
  const sentences = text.replace(/\r/g, '').split(/\n\s*\n/).join(' ').split(/(?<=[.!?])\s+/);
  let cur = '';
  for (const s of sentences.slice(skip)) {
    const t = s.replace(/\s+/g, ' ').trim();
    if (!t) continue;
    cur = cur ? cur + ' ' + t : t;
    if (cur.length >= 40) {
      if (cur.length <= 300) res.push(cur);
      cur = '';
      if (res.length === n) break;
    }
  }
  return res;
}
const read = (p) => fs.readFileSync(`${data}/${p}`, 'utf8');
const csvFirst = (p) => read(p).split('\n').slice(1).filter(Boolean).map((l) => l.replace(/,[^,]*$/, '').replace(/^"|"$/g, ''));
const domains = {
  fiction: lines(read('corpus/war-and-peace.txt'), 400, 2000),
  scripture: lines(read('corpus/kjv-bible.txt'), 400, 500),
  science: lines(read('corpus/openstax/astronomy.txt') + '\n\n' + read('corpus/openstax/microbiology.txt'), 400, 300),
  history: lines(read('corpus/openstax/us-history.txt') + '\n\n' + read('corpus/openstax/world-history.txt'), 400, 300),
  speeches: lines(read('corpus/nltk/state_union.txt'), 400, 100),
  aeronautics: lines(read('eval/cranfield/cran.all.1400').replace(/^\.[ITABW].*$/gm, ''), 400),
  banking: csvFirst('eval/banking77/train.csv').slice(0, 400),
};
for (const [name, ls] of Object.entries(domains)) fs.writeFileSync(`${out}/${name}.txt`, ls.join('\n') + '\n');
EOF
args=()
for f in "$OUT"/domains/*.txt; do args+=("$(basename "$f" .txt)=$f"); done
"$BIN" lens specialise --model "$MODEL" --out "$OUT" "${args[@]}" > /dev/null
node - "$OUT/specialisation.json" > "$OUT/lens.md" <<'EOF'
const s = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
const out = [`Share of each domain's tokens routed to each expert, as a ratio to the uniform baseline top_k / E = ${s.top_k} / ${s.num_experts} = ${s.baseline.toFixed(3)} (1.00 = uniform).`, ''];
for (const layer of s.layers) {
  out.push(`MoE layer ${layer.moe_layer}:`, '');
  out.push('| expert | ' + s.domains.join(' | ') + ' |', '|---|' + s.domains.map(() => '---').join('|') + '|');
  for (let e = 0; e < s.num_experts; e++)
    out.push(`| ${e} | ` + s.domains.map((d) => layer.domains[d].ratio[e].toFixed(2)).join(' | ') + ' |');
  out.push('');
}
console.log(out.join('\n'));
EOF
cat "$OUT/lens.md"
# A labelled figure of every layer (experts x domains), drawn as SVG and
# rendered by headless Chromium when it is installed: OUT/lens.png.
if command -v chromium > /dev/null; then
  node - "$OUT/specialisation.json" "$OUT/size.js" > "$OUT/lens.html" <<'EOF2'
const s = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
const cw = 62, ch = 22, left = 70, top = 92, gap = 40;
const layerW = left + s.domains.length * cw;
const cols = Math.min(2, s.layers.length), rows = Math.ceil(s.layers.length / cols);
const rowH = top - 30 + s.num_experts * ch + 30;
const W = cols * layerW + (cols - 1) * gap + 20, H = 30 + rows * rowH + 10;
const colour = (r) => {
  const t = Math.min(1, Math.abs(r - 1));
  const mix = (full) => Math.round(255 * (1 - t) + full * t);
  return r >= 1 ? `rgb(${mix(200)},${mix(40)},${mix(40)})` : `rgb(${mix(40)},${mix(90)},${mix(200)})`;
};
let svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="DejaVu Sans, sans-serif" font-size="11">`;
svg += `<text x="10" y="18" font-size="14">Share of each domain's tokens routed to each expert / uniform baseline k/E = ${s.top_k}/${s.num_experts} (white 1x, red up to 2x, blue down to 0x)</text>`;
s.layers.forEach((layer, li) => {
  const x0 = 10 + (li % cols) * (layerW + gap), y0 = 30 + Math.floor(li / cols) * rowH - 30;
  svg += `<text x="${x0 + left}" y="${y0 + 40}" font-size="13">MoE layer ${layer.moe_layer}</text>`;
  s.domains.forEach((d, di) => {
    svg += `<text transform="translate(${x0 + left + di * cw + cw / 2},${y0 + top - 6}) rotate(-35)" font-size="10">${d}</text>`;
  });
  for (let e = 0; e < s.num_experts; e++) {
    const y = y0 + top + e * ch;
    svg += `<text x="${x0 + left - 8}" y="${y + 15}" text-anchor="end">expert ${e}</text>`;
    s.domains.forEach((d, di) => {
      const r = layer.domains[d].ratio[e];
      svg += `<rect x="${x0 + left + di * cw}" y="${y}" width="${cw - 2}" height="${ch - 2}" fill="${colour(r)}"/>`;
      svg += `<text x="${x0 + left + di * cw + cw / 2 - 1}" y="${y + 15}" text-anchor="middle" fill="${Math.abs(r - 1) > 0.6 ? '#fff' : '#000'}">${r.toFixed(2)}</text>`;
    });
  }
});
svg += '</svg>';
console.log(`<!doctype html><html><body style="margin:0;background:#fff">${svg}</body></html>`);
require('fs').writeFileSync(process.argv[3], `console.log("${W},${H}")`);
EOF2
  size=$(node "$OUT/size.js")
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$size" --screenshot="$OUT/lens.png" "file://$PWD/$OUT/lens.html" > /dev/null 2>&1 || true
  [ -f "$OUT/lens.png" ] && echo "figure: $OUT/lens.png" >&2
fi
