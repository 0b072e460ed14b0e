#include "engine/train/embed_train_options.h"

namespace moeedb {

using json = nlohmann::json;
using namespace spec;

namespace {

// A field of the pooler spec, which the table reaches through `pooler`.
template <typename Get, typename Set>
Field<EmbedTrainOptions> PoolerField(const char* name, FieldType type, double min, double max, const char* meta,
                                     const char* help, Get get, Set set) {
  auto f = Custom<EmbedTrainOptions>(name, type, meta, help);
  f.rule.min = min;
  f.rule.max = max;
  f.get = get;
  f.set = set;
  return f;
}

FieldTable<EmbedTrainOptions> MakeEmbedTrainFields() {
  using O = EmbedTrainOptions;
  constexpr double kMaxCount = 1LL << 40;
  FieldTable<O> t;
  t.push_back(Integer("steps", &O::steps, 1, kMaxCount, "N", "schedule length in steps"));
  t.push_back(Number("minutes", &O::minutes, 0, 1e9, "M", "stop this run after M minutes (0: no limit); run again to resume"));
  t.push_back(Integer("stop_after", &O::stop_after, 0, kMaxCount, "N",
                      "stop this run after N steps (0: at the end); a checkpoint is written; run again to resume"));
  t.push_back(Integer("seed", &O::seed, 0, 4611686018427387904.0, "S", "seed of the draws and of a new pooler"));
  t.push_back(Integer("threads", &O::threads, 0, 1024, "N", "compute threads (0: libtorch's default)"));
  t.push_back(Integer("pairs_per_step", &O::pairs_per_step, 0, 1 << 16, "N", "contrastive pairs per step"));
  t.push_back(Integer("scored_per_step", &O::scored_per_step, 0, 1 << 16, "N", "scored pairs per step"));
  t.push_back(Integer("teacher_per_step", &O::teacher_per_step, 0, 1 << 16, "N",
                      "extra sentences per step from the teacher's list that no training file holds, distilled only "
                      "(0: such texts are not used)"));
  t.push_back(Integer("max_tokens", &O::max_tokens, 1, 1 << 16, "N", "cut sentences to N tokens"));
  t.push_back(Boolean("freeze_lm", &O::freeze_lm, "train the pooler only; the language model stays as it is"));
  auto bidi = Custom<O>("bidirectional", FieldType::kBoolean, "", "train (and mark the model for) bidirectional attention");
  bidi.get = [](const O& o) { return json(!o.causal); };
  bidi.set = [](O* o, const json& v) {
    o->causal = !v.get<bool>();
    return Status::OK();
  };
  t.push_back(std::move(bidi));
  auto reads_rw = Custom<O>("pooler_rw", FieldType::kEnum, "on|off", "the pooler also reads the router logits");
  reads_rw.rule.values = {"on", "off"};
  reads_rw.get = [](const O& o) { return json(o.pooler_reads_rw ? "on" : "off"); };
  reads_rw.set = [](O* o, const json& v) {
    o->pooler_reads_rw = v.get<std::string>() == "on";
    return Status::OK();
  };
  t.push_back(std::move(reads_rw));
  auto pooling = Custom<O>("token_pooling", FieldType::kEnum, "mean|last|weighted",
                           "how the pooler's rows pool over tokens; weighted: a learned weight per vocabulary entry, "
                           "starting at the log idf of the training sentences");
  pooling.rule.values = kTokenPoolings.Names();
  pooling.get = [](const O& o) { return json(kTokenPoolings.Name(o.pooler.token_pooling)); };
  pooling.set = [](O* o, const json& v) -> Status {
    MOEEDB_ASSIGN_OR_RETURN(o->pooler.token_pooling, kTokenPoolings.Parse(v.get<std::string>()));
    return Status::OK();
  };
  t.push_back(std::move(pooling));
  t.push_back(PoolerField(
      "out_dim", FieldType::kInteger, 0, 1 << 16, "N", "pooled vector size (0: the teacher's, else 512)",
      [](const O& o) { return json(o.pooler.out_dim); },
      [](O* o, const json& v) {
        o->pooler.out_dim = v.get<int64_t>();
        return Status::OK();
      }));
  t.push_back(PoolerField(
      "lexical_dim", FieldType::kInteger, 0, 1 << 16, "N",
      "width of the pooler's lexical channel, a learned dense bag of words beside the pooled vector (needs "
      "--token-pooling weighted; 0: none)",
      [](const O& o) { return json(o.pooler.lexical_dim); },
      [](O* o, const json& v) {
        o->pooler.lexical_dim = v.get<int64_t>();
        return Status::OK();
      }));
  t.push_back(PoolerField(
      "latents", FieldType::kInteger, 1, 4096, "N", "pooler latents", [](const O& o) { return json(o.pooler.latents); },
      [](O* o, const json& v) {
        o->pooler.latents = v.get<int64_t>();
        return Status::OK();
      }));
  t.push_back(Number("lr_lm", &O::lr_lm, 0, 1, "X", "peak learning rate of the model"));
  t.push_back(Number("lr_pooler", &O::lr_pooler, 0, 1, "X", "peak learning rate of the pooler"));
  t.push_back(Integer("warmup_steps", &O::warmup_steps, 0, kMaxCount, "N", "steps of linear warm-up before the cosine decay"));
  t.push_back(Number("min_lr_ratio", &O::min_lr_ratio, 0, 1, "X", "the cosine decay's floor, as a share of the peak"));
  t.push_back(Number("weight_decay", &O::weight_decay, 0, 1, "X", "AdamW weight decay (matrices and the pooler)"));
  t.push_back(Number("clip_norm", &O::clip_norm, 1e-6, 1e6, "X", "gradient norm clip"));
  t.push_back(Number("temperature", &O::temperature, 1e-4, 10, "X", "InfoNCE temperature"));
  t.push_back(Number("cosent_scale", &O::cosent_scale, 0, 1e4, "X", "CoSENT scale"));
  t.push_back(Number("distill_weight", &O::distill_weight, 0, 1e6, "X",
                     "weight of 1 - cos(student, teacher) (the pooled part against the teacher's vector; through a "
                     "learned linear map, started from a ridge fit, when the teacher's dimension differs)"));
  t.push_back(Number("distill_matrix_weight", &O::distill_matrix_weight, 0, 1e6, "X",
                     "weight of the squared difference of the in-batch cosine matrices, student against teacher"));
  t.push_back(Number("aux_loss_coef", &O::aux_loss_coef, 0, 1e6, "X", "weight of the routers' load-balancing loss"));
  t.push_back(Number("rw_weight", &O::rw_weight, 0, 1e6, "X",
                     "weight of the contrastive terms on the RW vector (router logits pooled as --rw-pooling says), "
                     "training the routers as a sentence vector too (0: off; not with --freeze-lm)"));
  t.push_back(Enum("rw_pooling", &O::rw_pooling, kRwPoolings, "last|mean", "how the RW term pools the router logits over tokens"));
  t.push_back(Number("hs_pooling_weight", &O::hs_pooling_weight, 0, 1e6, "X",
                     "weight of the contrastive terms on each training-free HS pooling (last, mean, layers-mean), so "
                     "they embed too (0: off; not with --freeze-lm)"));
  t.push_back(Number("side_match_weight", &O::side_match_weight, 0, 1e6, "X",
                     "weight of a term matching each training-free HS pooling's in-batch cosines to the pooled "
                     "vector's (0: off; not with --freeze-lm)"));
  t.push_back(Enum("side_match_target", &O::side_match_target, kMatchTargets, "pooled|lexical",
                   "what the match term pulls towards: the pooled vector's cosines or the texts' TF-IDF cosines"));
  t.push_back(Integer("checkpoint_every", &O::checkpoint_every, 1, kMaxCount, "N", "steps between checkpoints"));
  t.push_back(Integer("eval_every", &O::eval_every, 1, kMaxCount, "N", "steps between validation Spearmans"));
  return t;
}

}  // namespace

PoolerSpec EmbedTrainOptions::FitToModel() {
  PoolerSpec p;
  p.hidden = 0;
  p.out_dim = 0;
  return p;
}

Status EmbedTrainOptions::FitPooler(const ModelConfig& c, int64_t teacher_dim) {
  if (pooler.lexical_dim > 0 && pooler.token_pooling != TokenPooling::kWeighted)
    return Status::InvalidArgument("a lexical channel (lexical_dim) needs weighted token pooling");
  pooler.hidden = c.hidden_size;
  pooler.layer_rows = c.num_layers + 1;
  pooler.router_rows = pooler_reads_rw ? c.num_layers : 0;
  pooler.router_dim = pooler_reads_rw ? c.num_experts : 0;
  pooler.vocab = pooler.token_pooling == TokenPooling::kWeighted ? c.vocab_size : 0;
  pooler.ffn = 2 * c.hidden_size;
  if (pooler.out_dim == 0) pooler.out_dim = teacher_dim > 0 ? teacher_dim : 512;
  return Status::OK();
}

Status EmbedTrainOptions::Validate() const {
  if (out_dir.empty()) return Status::InvalidArgument("no output folder");
  if (steps <= 0) return Status::InvalidArgument("the step count must be positive");
  if (pooler.lexical_dim > 0 && pooler.token_pooling != TokenPooling::kWeighted)
    return Status::InvalidArgument("a lexical channel (lexical_dim) needs weighted token pooling");
  if (max_tokens < 1 || chunk_tokens < max_tokens)
    return Status::InvalidArgument("max_tokens >= 1 and chunk_tokens >= max_tokens needed");
  for (auto [name, w] : {std::pair{"rw_weight", rw_weight}, std::pair{"hs_pooling_weight", hs_pooling_weight},
                         std::pair{"side_match_weight", side_match_weight}})
    if (w < 0 || (w > 0 && freeze_lm))
      return Status::InvalidArgument(std::string(name) + " must be >= 0, and 0 when the language model is frozen");
  return Status::OK();
}

const FieldTable<EmbedTrainOptions>& EmbedTrainFields() {
  static const FieldTable<EmbedTrainOptions> kTable = MakeEmbedTrainFields();
  return kTable;
}

}  // namespace moeedb
