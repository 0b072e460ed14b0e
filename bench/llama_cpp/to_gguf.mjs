// Writes an OLMoE model folder (config.json, model.safetensors with f32
// tensors, tokenizer.json: what `moeedb model init` makes) as a GGUF file
// llama.cpp loads (architecture "olmoe"), so bench/llama_cpp.sh can run
// llama.cpp on the very weights moeedb runs. The experts of a layer are
// stacked into one tensor per projection, as llama.cpp's own converter does;
// norms and the router stay f32 (so does llama.cpp's converter), the other
// matrices are written as TYPE.
//
//   node bench/llama_cpp/to_gguf.mjs MODEL_DIR OUT.gguf [f32|bf16] [TOP_K]
//
// TOP_K (default: the config's num_experts_per_tok) is written as
// olmoe.expert_used_count: 1 gives the top-1 routing moeedb's --routing top1
// runs (llama-bench has no --override-kv).
import { closeSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';

const [dir, out, type = 'f32', topK] = process.argv.slice(2);
if (!dir || !out || !['f32', 'bf16'].includes(type) || (topK !== undefined && !/^[1-9][0-9]*$/.test(topK))) {
  console.error('usage: node to_gguf.mjs MODEL_DIR OUT.gguf [f32|bf16] [TOP_K]');
  process.exit(2);
}
const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
if (config.model_type !== 'olmoe') throw new Error(`model_type ${config.model_type}: only olmoe is written`);

// The safetensors header: name -> {dtype, shape, data_offsets}.
const st = openSync(join(dir, 'model.safetensors'), 'r');
const lenBuf = Buffer.alloc(8);
readSync(st, lenBuf, 0, 8, 0);
const headerLen = Number(lenBuf.readBigUInt64LE(0));
const headerBuf = Buffer.alloc(headerLen);
readSync(st, headerBuf, 0, headerLen, 8);
const header = JSON.parse(headerBuf.toString('utf8'));
const dataStart = 8 + headerLen;
function readF32(name) {
  const t = header[name];
  if (!t) throw new Error(`missing tensor ${name}`);
  if (t.dtype !== 'F32') throw new Error(`${name} is ${t.dtype}; only F32 checkpoints are read`);
  const [begin, end] = t.data_offsets;
  const buf = Buffer.alloc(end - begin);
  readSync(st, buf, 0, buf.length, dataStart + begin);
  return buf;
}

// GGUF value types and ggml tensor types used here.
const U32 = 4, I32 = 5, F32V = 6, STR = 8, ARR = 9;
const GGML = { f32: 0, bf16: 30 };

const L = config.num_hidden_layers, E = config.num_experts, H = config.hidden_size, I = config.intermediate_size;
// [gguf name, [ggml dims, innermost first], sources (stacked in order), stays f32]
const tensors = [
  ['token_embd.weight', [H, config.vocab_size], ['model.embed_tokens.weight'], false],
  ['output_norm.weight', [H], ['model.norm.weight'], true],
  ['output.weight', [H, config.vocab_size], [config.tie_word_embeddings ? 'model.embed_tokens.weight' : 'lm_head.weight'], false],
];
for (let l = 0; l < L; ++l) {
  const p = `model.layers.${l}.`;
  const experts = (proj) => Array.from({ length: E }, (_, e) => `${p}mlp.experts.${e}.${proj}.weight`);
  tensors.push(
    [`blk.${l}.attn_norm.weight`, [H], [`${p}input_layernorm.weight`], true],
    [`blk.${l}.attn_q.weight`, [H, H], [`${p}self_attn.q_proj.weight`], false],
    [`blk.${l}.attn_k.weight`, [H, H], [`${p}self_attn.k_proj.weight`], false],
    [`blk.${l}.attn_v.weight`, [H, H], [`${p}self_attn.v_proj.weight`], false],
    [`blk.${l}.attn_output.weight`, [H, H], [`${p}self_attn.o_proj.weight`], false],
    [`blk.${l}.attn_q_norm.weight`, [H], [`${p}self_attn.q_norm.weight`], true],
    [`blk.${l}.attn_k_norm.weight`, [H], [`${p}self_attn.k_norm.weight`], true],
    [`blk.${l}.ffn_norm.weight`, [H], [`${p}post_attention_layernorm.weight`], true],
    [`blk.${l}.ffn_gate_inp.weight`, [H, E], [`${p}mlp.gate.weight`], true],
    [`blk.${l}.ffn_gate_exps.weight`, [H, I, E], experts('gate_proj'), false],
    [`blk.${l}.ffn_up_exps.weight`, [H, I, E], experts('up_proj'), false],
    [`blk.${l}.ffn_down_exps.weight`, [I, H, E], experts('down_proj'), false],
  );
}

// The tokenizer as llama.cpp's "gpt2" (byte-level BPE) vocabulary; ids the
// tokenizer does not use (the embedding matrix is padded) become unused tokens.
const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
const tokens = new Array(config.vocab_size).fill(null);
const types = new Array(config.vocab_size).fill(5);  // UNUSED
for (const [piece, id] of Object.entries(tok.model.vocab)) if (id < tokens.length) { tokens[id] = piece; types[id] = 1; }
for (const a of tok.added_tokens || []) if (a.id < tokens.length) { tokens[a.id] = a.content; types[a.id] = a.special ? 3 : 4; }
for (let i = 0; i < tokens.length; ++i) if (tokens[i] === null) tokens[i] = `[PAD${i}]`;
const merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));

// Header: magic, version 3, tensor count, key-value count, the key-values,
// the tensor infos; then the tensor data, each aligned to 32 bytes.
const parts = [];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
const i32 = (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); };
const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
const f32 = (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); parts.push(b); };
const str = (s) => { const b = Buffer.from(s, 'utf8'); u64(b.length); parts.push(b); };
const kvs = [
  ['general.architecture', STR, 'olmoe'],
  ['general.name', STR, 'moeedb ' + dir.split('/').filter(Boolean).pop()],
  ['general.alignment', U32, 32],
  ['olmoe.context_length', U32, 4096],
  ['olmoe.embedding_length', U32, H],
  ['olmoe.block_count', U32, L],
  ['olmoe.feed_forward_length', U32, I],
  ['olmoe.attention.head_count', U32, config.num_attention_heads],
  ['olmoe.attention.head_count_kv', U32, config.num_key_value_heads ?? config.num_attention_heads],
  ['olmoe.rope.freq_base', F32V, config.rope_theta ?? 10000],
  ['olmoe.attention.layer_norm_rms_epsilon', F32V, config.rms_norm_eps ?? 1e-5],
  ['olmoe.expert_count', U32, E],
  ['olmoe.expert_used_count', U32, topK === undefined ? config.num_experts_per_tok : Number(topK)],
  ['tokenizer.ggml.model', STR, 'gpt2'],
  ['tokenizer.ggml.pre', STR, 'olmo'],
  ['tokenizer.ggml.tokens', [ARR, STR], tokens],
  ['tokenizer.ggml.token_type', [ARR, I32], types],
  ['tokenizer.ggml.merges', [ARR, STR], merges],
  ['tokenizer.ggml.eos_token_id', U32, config.eos_token_id ?? 0],
  ['tokenizer.ggml.bos_token_id', U32, config.bos_token_id ?? config.eos_token_id ?? 0],
  ['tokenizer.ggml.padding_token_id', U32, config.pad_token_id ?? 1],
];
parts.push(Buffer.from('GGUF'));
u32(3);
u64(tensors.length);
u64(kvs.length);
for (const [key, t, v] of kvs) {
  str(key);
  if (Array.isArray(t)) {
    u32(ARR); u32(t[1]); u64(v.length);
    for (const x of v) (t[1] === STR ? str : i32)(x);
  } else {
    u32(t);
    ({ [U32]: u32, [F32V]: f32, [STR]: str })[t](v);
  }
}
const align = (n) => Math.ceil(n / 32) * 32;
let offset = 0;
const layout = tensors.map(([name, dims, sources, keepF32]) => {
  const t = keepF32 || type === 'f32' ? 'f32' : 'bf16';
  const bytes = dims.reduce((a, b) => a * b, 1) * (t === 'f32' ? 4 : 2);
  const at = offset;
  offset = align(offset + bytes);
  str(name); u32(dims.length); for (const d of dims) u64(d); u32(GGML[t]); u64(at);
  return { name, sources, t, at, bytes };
});
let head = Buffer.concat(parts);
head = Buffer.concat([head, Buffer.alloc(align(head.length) - head.length)]);

const fd = openSync(out, 'w');
writeSync(fd, head);
let written = 0;
for (const { sources, t, at, bytes } of layout) {
  if (written < at) { writeSync(fd, Buffer.alloc(at - written)); written = at; }
  let n = 0;
  for (const name of sources) {
    const src = readF32(name);
    const data = t === 'f32' ? src : toBf16(src);
    writeSync(fd, data);
    n += data.length;
  }
  if (n !== bytes) throw new Error(`tensor size mismatch: ${n} != ${bytes}`);
  written += n;
}
if (written < offset) writeSync(fd, Buffer.alloc(offset - written));
closeSync(fd);
closeSync(st);
console.error(`wrote ${out}: ${tensors.length} tensors, ${type}, ${(head.length + offset) / 1e9} GB`);

// f32 -> bf16, rounding to nearest even (NaN kept a NaN).
function toBf16(src) {
  const n = src.length / 4;
  const outBuf = Buffer.alloc(n * 2);
  const u = new Uint32Array(src.buffer, src.byteOffset, n);
  const o = new Uint16Array(outBuf.buffer, outBuf.byteOffset, n);
  for (let i = 0; i < n; ++i) {
    const x = u[i];
    o[i] = (x & 0x7fffffff) > 0x7f800000 ? (x >>> 16) | 0x40 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
  }
  return outBuf;
}
