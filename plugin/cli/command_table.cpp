// The CLI's command table: every command moeedb has, one row each (plugin/cli/command.h
// says what a row holds), in the order `moeedb --help` lists them. The functions
// that run them live in cmd_*.cpp.
#include "database/database.h"
#include "database/spec/collection_spec.h"
#include "database/spec/search_spec.h"
#include "engine/model/model_family.h"
#include "engine/train/embed_train_options.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"
#include "plugin/cli/spec_flags.h"

namespace moeedb::cli {

namespace {

// Options more than one training command takes.
const std::vector<FlagSpec> kCorpusFlags = {
    {"corpus", "FILES", "comma-separated text, CSV or TSV files (also as positional arguments)"},
    {"line-documents", "", "plain-text files hold one document per line (default: blank-line paragraphs)"},
};
const FlagSpec kTorchThreadsFlag{"threads", "N", "intra-op threads (default: libtorch's)", IntRule{0, 0, 1024}};

}  // namespace

std::vector<Command> CommandTable() {
  return {
      {"tokenize", "text lines -> token ids with a tokenizer.json",
       "tokenize (--model DIR | --tokenizer FILE) [--no-special] < texts.txt", R"(
Reads one text per line from stdin and prints one line of space-separated token ids per input line, in order.)",
       Concat(EmbeddingFlags({"model", "tokenizer"}), {{"no-special", "", "skip the post-processor (no BOS/EOS)"}}),
       RunTokenize},
      {"embed", "text lines -> {\"hs\":[...],\"rw\":[...],\"tokens\":N} JSON lines",
       "embed --model DIR [options] < texts.txt", R"(
Embeds one input per stdin line and prints one JSON line per input, in input order:
{"hs":[...],"rw":[...],"tokens":N}. hs is the final-normed hidden state of the last
token; rw the router read-out of every MoE layer at the last token, in layer order.)",
       Concat(
           EmbeddingFlags({"model", "tokenizer", "prompt", "instruction", "hs_pooling", "rw_pooling", "routing",
           "expert_dispatch", "cache_dir", "dtype", "quant", "device", "threads", "workers", "batch_tokens"}),
           {
           {"rw", "KIND", "RW read-out: logits | probs | log_probs (default: the family's, logits; probs for DeepSeek)"},
           {"jsonl", "", "inputs are JSON lines {\"text\": ...}"},
           {"ids", "", "inputs are space-separated token ids, used as they are (no prompt, no special tokens)"},
           {"stats", "", "print texts/s and tokens/s (tokenizing and embedding, model load excluded) to stderr"},
       }),
       RunEmbed},
      {"model init", "write a model folder with random weights (HuggingFace layout)",
       "model init --config CONFIG.json --tokenizer tokenizer.json --seed N --out DIR", R"(
Writes config.json, model.safetensors and tokenizer.json in HuggingFace layout, with
random weights (normal, std from the config; norms 1), deterministic in the seed.)",
       {
           {"config", "FILE", "a config.json (model_type: " + SupportedModelTypes() + ")"},
           {"tokenizer", "FILE", "tokenizer.json to copy into the model folder"},
           {"seed", "N", "random seed", IntRule{0, 0, (1LL << 62)}},
           {"out", "DIR", "output model folder"},
           {"dtype", "T", "f32 | bf16 | f16 (default f32)"},
           {"layout", "L", "per-expert | packed expert tensors (default per-expert)"},
           {"std", "X", "weight standard deviation (default: the config's initializer_range, else 0.02)"},
       },
       RunModelInit, {"config", "out"}},
      {"model info", "describe a model folder and its default embedding settings",
       "model info [--model DIR]", R"(
Loads a model folder (all tensors checked) and describes it: its folder, architecture, trained pooler and the
embedding settings it uses by default.)",
       {{"model", "DIR", "model folder (default: the embedded default model)"}},
       RunModelInfo},
      {"model calibrate", "fit and write a setup's HS/RW standardisation statistics",
       "model calibrate --model DIR [--routing SPEC] [--prompt NAME] [--out FILE]", R"(
Fits the per-feature HS and RW statistics collections z-score with (64 fixed calibration texts) and writes
them with the setup they belong to. New collections with that exact setup read them instead of recomputing.)",
       Concat(EmbeddingFlags({"model", "routing", "prompt", "hs_pooling", "rw_pooling"}),
           {{"out", "FILE", "where to write (default DIR/standardization.json)"}}),
       RunModelCalibrate},
      {"model prune", "write a model with fewer routed experts per MoE layer",
       "model prune --model DIR --keep F|N --by RULE [--calib FILE] --out DIR", R"(
Writes a HuggingFace model folder with fewer routed experts in every MoE layer: router rows
and expert tensors removed together, config.json's expert count updated (and what was kept
recorded), tokenizer, defaults and pooler carried over. Shared experts and dense layers stay.
Rules (engine/analysis/expert_pruning.h): usage = most routed probability mass on --calib; spectral =
moeedb's own cover of the SSMoE spectral centroids; usage+spectral = that cover weighted by
usage; random = the ablation baseline. RW of the pruned model has fewer dimensions.)",
       Concat(EmbeddingFlags({"model", "threads"}), {
           {"keep", "F|N", "experts kept per MoE layer: a fraction (0.75) or a count (6)"},
           {"by", "RULE", "usage | spectral | usage+spectral | random (default usage+spectral)"},
           {"calib", "FILE", "calibration texts, one per line (the usage rules need them)"},
           {"experts", "JSON", "the kept experts given outright, {\"LAYER\": [ids], ...} for every MoE layer (instead of --keep/--by)"},
           {"out", "DIR", "the new model folder (must not exist)"},
           {"seed", "N", "seed of the random rule", IntRule{1, 0, 1LL << 62}},
           {"max-texts", "N", "calibration lines read at most", IntRule{2000, 1, 10000000}},
       }),
       RunModelPrune, {"out"}},
      {"ingest", "embed and store JSONL documents in a collection",
       "ingest --db DIR --collection NAME [--model DIR] [options] FILE.jsonl", R"(
Embeds and stores JSONL documents {"id": "...", "text": "...", "metadata": {...}}.
The whole file is validated first: bad lines are reported with their numbers and nothing
is stored. Each batch is one atomic, synced write; an existing id is replaced.)",
       // A new collection's embedding setup and settings (an existing one keeps
       // what it recorded: --model must then hold the same weights).
       Concat(Concat({kDbFlag, kIndexDirFlag, kCollFlag, {"batch", "N", "documents per atomic, synced write", IntRule{32, 1, 100000}}},
                     EmbeddingFlags({"model", "routing", "prompt", "hs_pooling", "rw_pooling", "dtype", "quant",
                                     "device", "threads", "workers"})),
              SpecFlags(CollectionFields(), kIngestFields)),
       RunIngest, {"collection"}},
      {"search", "search a collection: fused (cos_HS + alpha * cos_RW), hs, rw, lexical or hybrid",
       "search --db DIR --collection NAME [options] \"query text\"", R"(
Embeds the query like the collection's documents and ranks by cos_HS + alpha * cos_RW
(--mode fused), by BM25 over the texts (--mode lexical: no embedding), or by all three
signals fused (--mode hybrid). Prints {"hits": [{"id", "score", "score_hs",
"score_rw", "score_lex", "parts", "text", "metadata"}]}; parts: each signal's share
of score. With --group-by KEY: {"groups": [{"value", "hits"}]}, the hits grouped by
the values of that payload field, --group-size hits each, --k groups.)",
       Concat(Concat({kDbFlag, kIndexDirFlag, kCollFlag, {"format", "F", "json (default) | text (one readable line per hit)"},
                      {"group-by", "KEY", "group the hits by this payload field"},
                      {"group-size", "N", "hits per group (with --group-by)", IntRule{3, 1, static_cast<long long>(kMaxSearchK)}}},
                     EmbeddingFlags({"model", "dtype", "quant", "device", "threads"})),
              SpecFlags(SearchFields(), {.skip = {"query"}})),  // the query is the argument
       RunSearch, {"collection"}},
      {"get", "print stored documents by id",
       "get --db DIR --collection NAME ID...", R"(
Prints the stored documents as JSON lines.)",
       {kDbFlag, kIndexDirFlag, kCollFlag, {"vectors", "", "include the raw hs and rw vectors"}},
       RunGet, {"collection"}},
      {"delete", "delete documents by id",
       "delete --db DIR --collection NAME ID...", R"(
Deletes documents (one atomic, synced write).)",
       {kDbFlag, kIndexDirFlag, kCollFlag},
       RunDelete, {"collection"}},
      {"collections list", "the collections and their document counts", "collections list --db DIR", R"(
Prints the collections as a JSON array of {name, documents}.)",
       {kDbFlag, kIndexDirFlag},
       RunCollectionsList},
      {"collections info", "a collection's document count and recorded setup", "collections info NAME --db DIR", R"(
Prints a collection's document count and the setup it recorded (model, routing, pooling, indexes).)",
       {kDbFlag, kIndexDirFlag},
       RunCollectionsInfo},
      {"collections drop", "drop a collection with its documents and indexes", "collections drop NAME --db DIR", R"(
Drops a collection with its documents, vectors and indexes.)",
       {kDbFlag, kIndexDirFlag},
       RunCollectionsDrop},
      {"collections index", "index a payload key, or drop its index", "collections index NAME --db DIR --key KEY (--kind KIND | --drop)", R"(
Declares a payload index on KEY (a key or path as filters read it) and builds it: a filtered
search whose filter ANDs equalities or ranges on indexed keys then scores only the documents the
index names. Answers are the same with or without. Prints the collection's payload indexes and
how many documents hold each key.)",
       {kDbFlag, kIndexDirFlag, {"key", "KEY", "the payload key"},
        {"kind", "KIND", "keyword | integer | float | bool | datetime | uuid | text | geo"},
        {"drop", "", "drop the key's index instead"}},
       RunCollectionsIndex, {"key"}},
      {"scroll", "list the documents a filter keeps, in id order or by a payload field",
       "scroll --db DIR --collection NAME [--filter JSON] [--order-by KEY [--desc]] [--limit N] [--after ID]", R"(
Prints {"documents": [{"id", "text", "metadata"}], "next_after"}: the documents the filter keeps
in id order from --after on (pass next_after as --after for the next page); with --order-by, one
page ordered by that payload field (numbers, booleans, datetimes), each with its order_value.)",
       {kDbFlag, kIndexDirFlag, kCollFlag, {"filter", "JSON", "a metadata filter (docs/cli.md)"},
        {"order-by", "KEY", "order by this payload field"}, {"desc", "", "descending (with --order-by)"},
        {"limit", "N", "documents per page", IntRule{20, 1, static_cast<long long>(kMaxSearchK)}}, {"after", "ID", "the first id of the page"}},
       RunScroll, {"collection"}},
      {"facet", "how many documents hold each value of a payload field",
       "facet --db DIR --collection NAME --key KEY [--filter JSON] [--limit N]", R"(
Prints {"hits": [{"value", "count"}]}: the strings, integers and booleans at KEY among the
documents the filter keeps, by count, then value (a document counted once per value).)",
       {kDbFlag, kIndexDirFlag, kCollFlag, {"key", "KEY", "the payload field"}, {"filter", "JSON", "a metadata filter"},
        {"limit", "N", "values at most", IntRule{10, 1, static_cast<long long>(kMaxSearchK)}}},
       RunFacet, {"collection", "key"}},
      {"cluster status", "a cluster's nodes, placement and replicas, from etcd",
       "cluster status --etcd HOSTS [--cluster NAME] [--db URI]", R"(
Prints the cluster as JSON: its nodes (address, lease, seconds left on it, draining) and each
sharded collection's placement: per shard the nodes assigned and leaving, and every ready
replica's applied change-log entry, documents and index bytes; with --db, each collection's
last entry and each replica's lag behind it.)",
       {kEtcdFlag, kClusterNameFlag, {"db", "URI", "the cluster's PostgreSQL store, for each replica's lag"},
        kTlsCaFlag, kTlsCertFlag, kTlsKeyFlag},
       RunClusterStatus, {"etcd"}},
      {"cluster drain", "move a node's replicas to the others before maintenance",
       "cluster drain NODE --etcd HOSTS [--cluster NAME] [--undo]", R"(
Marks NODE as draining: the placement assigns it nothing new and moves each of its replicas to
another node, while NODE serves them until their new replicas are ready (watch with cluster
status). --undo lets it take replicas again.)",
       {kEtcdFlag, kClusterNameFlag, {"undo", "", "end the draining"}, kTlsCaFlag, kTlsCertFlag, kTlsKeyFlag},
       RunClusterDrain, {"etcd"}},
      {"cluster reshard", "split a placed collection into another number of shards, online",
       "cluster reshard COLLECTION --shards N --etcd HOSTS [--cluster NAME] [--wait SECONDS]", R"(
Asks the cluster to split COLLECTION into N shards: the nodes build the new split's replicas
from the stored documents while the old split answers every search and takes every write, and
the placement switches to the new split in one etcd transaction once each of its shards has its
replicas ready (cluster status shows "resharding_to" meanwhile). The old split's replicas serve
10 s more, then go. With --wait, returns once the new split is in use.)",
       {kEtcdFlag, kClusterNameFlag,
        {"shards", "N", "the new shard count", IntRule{1, 1, moeedb::kMaxShards}},
        {"wait", "SECONDS", "wait up to this long for the switch (0: return once asked)", IntRule{0, 0, 86400}},
        kTlsCaFlag, kTlsCertFlag, kTlsKeyFlag},
       RunClusterReshard, {"etcd", "shards"}},
      {"checkpoint", "consistent backup of the database",
       "checkpoint --db DIR --out DIR", R"(
Writes a consistent copy of the database (RocksDB checkpoint: hard links where possible).
Indexes are derived: the copy rebuilds them on first open.)",
       {kDbFlag, kIndexDirFlag, {"out", "DIR", "backup folder (must not exist)"}},
       RunCheckpoint, {"out"}},
      {"serve", "HTTP server: OpenAI, TEI, Ollama, Weaviate, Qdrant and Chroma protocols, the collections API, the console",
       "serve --db DIR --model DIR [options]", R"(
Serves OpenAI POST /v1/embeddings, TEI POST /embed, the collections API, /health, /info
and /metrics (docs in README.md). SIGTERM/SIGINT: stop accepting, finish in-flight
requests, snapshot the indexes, exit 0.)",
       Concat(EmbeddingFlags({"model", "routing", "prompt", "dtype", "quant", "device"}), {
           {"db", "DIR", "database folder (created if needed) or a PostgreSQL URI (postgresql://...); without --model, "
                         "the model its collections recorded"},
           kIndexDirFlag,
           {"follow-ms", "N", "with a PostgreSQL --db: the longest the open collections wait before reading the "
                              "change log for other nodes' writes (milliseconds; a commit wakes them at once)",
            IntRule{200, 10, 60000}},
           {"snapshot-entries", "N", "snapshot an open collection's indexes once this many change-log entries (writes) "
                                     "were applied since its last snapshot (0: not by count): a restart after kill -9 "
                                     "replays only what followed it",
            IntRule{static_cast<long long>(kDefaultSnapshotEntries), 0, 1000000000}},
           {"snapshot-s", "N", "snapshot an open collection's indexes once this many seconds passed since its last "
                               "snapshot with any entry applied (0: not by time)",
            IntRule{static_cast<long long>(kDefaultSnapshotSeconds), 0, 86400}},
           {"log-retention-entries", "N", "with a PostgreSQL --db: keep each open collection's newest N change-log "
                                          "entries and trim the rest (0: keep all); a node down for longer than "
                                          "that rebuilds its replicas from the store when it returns",
            IntRule{static_cast<long long>(kDefaultLogRetentionEntries), 0, 1000000000000LL}},
           {"max-staleness-ms", "N", "with a PostgreSQL --db: the most a search may lag the change log (a replica that "
                                     "has not read it for longer reads it first, or the search answers 503; 0: no bound)",
            IntRule{static_cast<long long>(kDefaultMaxStalenessMs), 0, 3600000}},
           {"max-lag-entries", "N", "with --etcd: the most change-log entries another node's replica may be behind "
                                    "this node's when it coordinates a search (it catches up first, or another is asked)",
            IntRule{static_cast<long long>(kDefaultMaxLagEntries), 0, 1000000000}},
           {"etcd", "HOSTS", "join a cluster: etcd client endpoints, host:port[,host:port...] (needs a PostgreSQL --db "
                             "and a fixed --port); sharded collections are placed on the nodes through it"},
           {"cluster", "NAME", "with --etcd: the cluster's name, its keys' prefix in etcd (default moeedb)"},
           {"node-id", "ID", "with --etcd: this node's id, unique in the cluster (default HOST-PORT)"},
           {"advertise", "HOST:PORT", "with --etcd: where the other nodes reach this one (default --host:--port)"},
           {"lease-ttl", "S", "with --etcd: seconds after which a node that stopped answering etcd is gone",
            IntRule{5, 2, 3600}},
           {"node-left-delay", "S", "with --etcd: seconds a gone node keeps its replicas before they are built "
                                    "elsewhere (a shard without another ready replica is placed elsewhere at once)",
            IntRule{60, 0, 86400}},
           {"host", "ADDR", "listen address (default 127.0.0.1)"},
           {"port", "N", "listen port (0 = any free port, printed on start)", IntRule{8080, 0, 65535}},
           {"qdrant-port", "N", "also serve the Qdrant REST API at the root of this port, as Qdrant does on 6333 "
           "(0 = any free port, printed on start; default: only under /qdrant on --port)", IntRule{-1, 0, 65535}},
           {"chroma-port", "N", "also serve Chroma's API (/api/v2) on this port, as Chroma does on 8000 "
           "(0 = any free port, printed on start; default: only on --port)", IntRule{-1, 0, 65535}},
           {"api-key", "KEY", "require 'Authorization: Bearer KEY' on every route but /health"},
           {"api-key-file", "F", "read the API key from a file (first line)"},
           {"tls-cert", "FILE", "serve HTTPS on every port with this PEM certificate chain (with --tls-key); with "
                                "--etcd also this node's certificate toward etcd"},
           kTlsKeyFlag,
           {"tls-ca", "FILE", "with --etcd: PEM CA certificates etcd's and the other nodes' certificates must chain "
                              "to; set, they are asked over https (every node of the cluster serves https then)"},
           {"served-model-name", "NAME", "model id clients use (default: the model folder's name)"},
           {"threads", "N", "compute threads (default: all cores)", IntRule{0, 0, 1024}},
           {"max-body-bytes", "N", "request body limit", IntRule{2000000, 1024, 1LL << 31}},
           {"max-inputs", "N", "inputs per /v1/embeddings request", IntRule{2048, 1, 1 << 20}},
           {"max-tokens", "N", "tokens per input", IntRule{8192, 1, 1 << 20}},
           {"truncate", "", "truncate over-long inputs instead of answering 422"},
           {"queue", "N", "embedding jobs waiting at most before 429", IntRule{256, 1, 1 << 20}},
           {"batch-tokens", "N", "tokens a model worker takes at most per forward, across requests", IntRule{16384, 1, 1 << 24}},
           {"forward-tokens", "N", "padded tokens per forward pass within a worker's batch",
           IntRule{EmbeddingSpec{}.batch_tokens, 1, 1 << 24}},
           {"max-connections", "N", "open connections at most", IntRule{256, 1, 100000}},
           {"idle-timeout", "S", "close a connection silent this many seconds", IntRule{30, 1, 86400}},
           {"request-timeout", "S", "close a connection whose next request is not fully received this many seconds after the last answer (408 if it began)", IntRule{60, 1, 86400}},
           {"workers", "N", "model workers: each takes its share of the queued texts when free and embeds them with threads/N compute threads", IntRule{2, 1, 64}},
       }),
       RunServe, {"db"}},
      {"alpha", "label-free alpha for cos_HS + alpha * cos_RW from unlabeled pairs",
       "alpha --model DIR --pairs FILE", R"(
Chooses alpha in [0, 3] (step 0.05) for score = cos_HS + alpha * cos_RW without labels:
the alpha maximising Spearman(s_f, s_HS) + Spearman(s_f, s_RW) over the pairs, with HS
and RW z-scored per feature over the pairs' texts. Prints one JSON object.)",
       Concat(
           EmbeddingFlags({"model", "routing", "prompt", "threads"}),
           {{"pairs", "FILE", "unlabeled pairs: 'text1<TAB>text2' lines, or CSV (first two fields; STS-B files work)"}}),
       RunAlpha, {"pairs"}},
      {"lens", "per-layer cosine of top-1 vs top-k MoE outputs (MoE Lens)",
       "lens --model DIR < texts.txt", R"(
MoE Lens: for every MoE layer, the mean cosine over the texts between the top-1 output
E_top1(u) + u and the top-k output sum g_i (E_i(u) + u) / sum g_i at the last token
(shared experts excluded). Prints one JSON line per layer.)",
       EmbeddingFlags({"model", "prompt", "threads"}),
       RunLens},
      {"lens specialise", "which experts each text domain routes to",
       "lens specialise --model DIR --texts DOMAIN=FILE [DOMAIN=FILE...] [--out DIR]", R"(
MoE Lens's specialisation (method.md D): per MoE layer and expert, the share of each
domain's tokens whose top-k holds the expert, and its ratio to the uniform baseline k/E.
Prints the JSON; with --out also writes it and a heat map per layer (rows: experts 0..E-1
top to bottom; columns: the domains in the order given; white = the baseline, red = more,
blue = less, full colour at 2x and 0x).)",
       Concat(EmbeddingFlags({"model", "threads"}), {
           {"texts", "DOMAIN=FILE", "a domain's texts, one per line (more DOMAIN=FILE may follow as arguments)"},
           {"out", "DIR", "where to write specialisation.json and one heat map per MoE layer (layer-N.png)"},
           {"max-texts", "N", "lines read per domain at most", IntRule{500, 1, 10000000}},
       }),
       RunLensSpecialise},
      {"train tokenizer", "train a byte-level BPE tokenizer on text files",
       "train tokenizer --corpus FILES --out tokenizer.json [--vocab 8192]", R"(
Trains a byte-level BPE (GPT-2 regex, NFC) on the corpus and writes a HuggingFace tokenizer.json. Special
tokens: <|endoftext|> (id 0), <|padding|> (id 1). CSV and TSV files contribute their fields that contain a
space.)",
       Concat(kCorpusFlags, {
           {"vocab", "N", "vocabulary size including 2 special tokens and 256 bytes", IntRule{8192, 258, 1 << 20}},
           {"min-frequency", "N", "never merge a pair seen fewer times", IntRule{2, 1, 1 << 30}},
           {"out", "FILE", "tokenizer.json to write"},
       }),
       RunTrainTokenizer, {"out"}},
      {"train model", "pretrain a small MoE language model",
       "train model --config C.json --tokenizer tokenizer.json --corpus FILES --out DIR [--minutes M | --steps N] "
          "[--seed S]", R"(
Trains an MoE language model from scratch (next-token loss + load-balancing loss, AdamW, warm-up + cosine,
gradient clipping) and writes a HuggingFace model folder the engine loads. Checkpoints every 200 steps;
running the same command again resumes. Every N-th document is held out for validation perplexity.)",
       Concat(kCorpusFlags, {
           {"config", "FILE", "config.json of the model to train (an OLMoE-family config)"},
           {"tokenizer", "FILE", "tokenizer.json (copied into --out)"},
           {"out", "DIR", "model folder to write; training state in DIR/train_state"},
           {"minutes", "M", "wall-clock budget of this run; without --steps it also sizes the schedule"},
           {"steps", "N", "schedule length in steps (reproducible across machines; default 0: sized by --minutes)", IntRule{0, 0, 1LL << 40}},
           {"seed", "S", "seed for initialisation and batches", IntRule{0, 0, 1LL << 62}},
           {"batch", "N", "sequences per step", IntRule{16, 1, 4096}},
           {"seq", "N", "tokens per sequence", IntRule{128, 2, 1 << 16}},
           {"lr", "X", "peak learning rate (default 2e-3)"},
           {"warmup", "N", "warm-up steps", IntRule{100, 1, 1 << 30}},
           kTorchThreadsFlag,
           {"val-every", "N", "documents: every N-th goes to validation", IntRule{50, 2, 1 << 30}},
           {"eval-every", "N", "steps between validation perplexities", IntRule{500, 1, 1 << 30}},
       }),
       RunTrainModel, {"config", "tokenizer", "out"}},
      {"train embed", "train an embedding model: pooler (and model) on pairs, scores, a teacher",
       "train embed --model DIR --out DIR [--pairs FILES] [--scored FILE] [--labeled FILE] "
          "[--teacher TEXTS,VECTORS] [--freeze-lm] [--steps N]", R"(
Trains a multi-layer cross-attention pooler (and, unless --freeze-lm, the whole model) with InfoNCE on pairs,
CoSENT on scored pairs and distillation towards teacher vectors. Checkpoints every 200 steps; running the same
command again resumes.)",
       Concat({
           {"model", "DIR", "the language model to start from"},
           {"out", "DIR", "model folder to write (model, pooler.json, pooler.safetensors); state in DIR/train_state"},
           {"pairs", "FILES", "comma-separated TSV pair files with a header (text1 text2 | anchor entailment contradiction)"},
           {"scored", "FILE", "CSV sentence1,sentence2,score pairs for CoSENT (STS-B train)"},
           {"labeled", "FILE", "CSV text,label with a header: same-label texts are positives (Banking77 train)"},
           {"validation", "FILE", "CSV scored pairs for the validation Spearman (STS-B dev)"},
           {"teacher", "TEXTS,VECTORS", "teacher texts (one per line) and their float32 vectors (eval/teacher)"},
           {"teacher-dim", "N", "dimensions of the teacher vectors (with --teacher)", IntRule{512, 1, 1 << 16}},
       },
       // The training options: engine/train/embed_train_options.h declares each once.
       SpecFlags(EmbedTrainFields())),
       RunTrainEmbed, {"model", "out"}},
      {"eval sts", "STS-B Spearman of HS, RW and their sum",
       "eval sts (--model DIR | --vectors TEXTS,VECTORS | --baseline tfidf) --data STSB_DIR [--plot FILE.png]", R"(
STS-B (stsb-en-dev.csv, stsb-en-test.csv): Spearman x100 on test for HS, RW, concat, and cos_HS + alpha cos_RW
with alpha = 1, alpha chosen on dev (grid 0..3 step 0.05) and the label-free alpha (chosen on the unlabeled
test pairs).)",
       Concat(EvalFlags(), {{"plot", "FILE", "write Spearman against alpha (dev: blue, test: red) as a PNG"}}),
       RunEvalSts, {"data"}},
      {"eval retrieval", "Cranfield nDCG@10, MRR@10, Recall@100 in every search mode",
       "eval retrieval (--model DIR | --vectors TEXTS,VECTORS | --baseline tfidf) --data CRANFIELD_DIR", R"(
Cranfield: the documents go into a real collection (temporary database), each query is searched with modes hs,
rw and fused; prints nDCG@10 (graded), MRR@10 and Recall@100. With --limit N: the first N queries, over their
judged documents plus the first 200.)",
       // The weights and fusion of the hybrid runs (eval runs every mode).
       Concat(Concat(EvalFlags(), SpecFlags(SearchFields(), {.only = {"alpha", "beta", "w_hs", "fusion", "norm", "rrf_k"}})),
              {{"queries", "SET", "all (default) | tune (the even-numbered half) | test (the odd-numbered half)"},
               {"tune", "", "also a grid of hybrid settings (lexical weight, normalisation, rrf)"}}),
       RunEvalRetrieval, {"data"}},
      {"eval classify", "Banking77 kNN accuracy",
       "eval classify (--model DIR | --vectors TEXTS,VECTORS | --baseline tfidf) --data BANKING77_DIR [--k 10]", R"(
Banking77 (train.csv, test.csv): kNN accuracy of test texts against the training texts, by HS (raw), RW and
fused similarity (z-scores fitted on train). --limit N takes every (rows/N)-th row of each split, so all
labels stay represented.)",
       Concat(EvalFlags(), {{"k", "N", "neighbours", IntRule{10, 1, 1000}},
                            {"alpha", "X", "alpha of the fused similarity (default: the model's, else 1)"}}),
       RunEvalClassify, {"data"}},
      {"eval texts", "every text the evaluation tasks embed, one JSON object a line",
       "eval texts --data EVAL_DIR > TEXTS.jsonl", R"(
Writes {"text": ...} for every distinct text of STS-B dev and test, Banking77 train and test and Cranfield's
documents and queries (EVAL_DIR/{stsb,banking77,cranfield}): what an outside model embeds (for example
eval/teacher/minilm.py embed-jsonl) so that `eval ... --vectors` measures it with the same tasks.)",
       {{"data", "DIR", "the folder holding stsb/, banking77/ and cranfield/"}}, RunEvalTexts, {"data"}},
  };
}

}  // namespace moeedb::cli
