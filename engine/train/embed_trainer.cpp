#include "engine/train/embed_trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/types.h>  // before clip_grad.h, which does not include what it uses
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "base/statistics.h"
#include "base/atomic_file.h"
#include "engine/model/model_config.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/train/embed_encoder.h"
#include "engine/io/safetensors.h"
#include "engine/io/tensor_from_view.h"
#include "engine/train/ridge_map.h"
#include "engine/train/train_net.h"
#include "engine/train/train_state.h"

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using embed_train::Encoder;
using embed_train::L2Normalize;
using embed_train::RidgeMap;
using embed_train::SideVectors;
using embed_train::StandardizedUnit;

std::string Fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, a);
  return buf;
}

Status CheckData(const EmbedTrainData& d, const ModelConfig& c, const EmbedTrainOptions& o) {
  const int32_t n = static_cast<int32_t>(d.sentences.size());
  for (size_t i = 0; i < d.sentences.size(); ++i) {
    if (d.sentences[i].empty()) return Status::InvalidArgument("sentence " + std::to_string(i) + " has no tokens");
    for (int32_t id : d.sentences[i])
      if (id < 0 || id >= c.vocab_size)
        return Status::InvalidArgument("sentence " + std::to_string(i) + ": token id " + std::to_string(id) +
                                       " is outside the vocabulary");
  }
  auto in = [n](int32_t i) { return i >= 0 && i < n; };
  for (const auto& p : d.pairs)
    if (!in(p.anchor) || !in(p.positive) || (p.negative != -1 && !in(p.negative)) || p.source < 0)
      return Status::InvalidArgument("a contrastive pair names a sentence that does not exist");
  for (const auto* list : {&d.scored, &d.validation})
    for (const auto& p : *list)
      if (!in(p.a) || !in(p.b)) return Status::InvalidArgument("a scored pair names a sentence that does not exist");
  if (d.pairs.empty() && d.scored.empty() && d.teacher.empty())
    return Status::InvalidArgument("no training signal: give pairs, scored pairs or teacher vectors");
  if (!d.teacher.empty()) {
    if (d.teacher_dim <= 0 || d.teacher.size() % static_cast<size_t>(d.teacher_dim) != 0)
      return Status::InvalidArgument("teacher vectors must be rows of teacher_dim (" + std::to_string(d.teacher_dim) + ") values");
    if (d.teacher_row.size() != d.sentences.size())
      return Status::InvalidArgument("teacher_row must have one entry per sentence");
    if (std::none_of(d.teacher_row.begin(), d.teacher_row.end(), [](int32_t r) { return r >= 0; }))
      return Status::InvalidArgument("teacher vectors were given but no sentence has one");
    const int64_t rows = static_cast<int64_t>(d.teacher.size()) / d.teacher_dim;
    for (int32_t r : d.teacher_row)
      if (r < -1 || r >= rows) return Status::InvalidArgument("a teacher row index is out of range");
    for (int32_t s : d.teacher_only)
      if (s < 0 || s >= static_cast<int32_t>(d.sentences.size()) || d.teacher_row[s] < 0)
        return Status::InvalidArgument("a teacher-only sentence has no teacher vector");
  }
  return Status::OK();
}

struct StepBatch {
  std::vector<ContrastivePair> pairs;
  std::vector<ScoredPair> scored;
  std::vector<int32_t> extra;  // teacher-only sentences
};

StepBatch DrawBatch(const EmbedTrainData& d, const std::vector<std::vector<int32_t>>& by_source,
                    const EmbedTrainOptions& o, int64_t step) {
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(step) + 1);
  StepBatch b;
  if (!by_source.empty()) {
    const int64_t per = std::max<int64_t>(1, o.pairs_per_step / static_cast<int64_t>(by_source.size()));
    for (const auto& src : by_source) {
      std::uniform_int_distribution<size_t> pick(0, src.size() - 1);
      for (int64_t i = 0; i < per; ++i) b.pairs.push_back(d.pairs[src[pick(rng)]]);
    }
  }
  if (!d.scored.empty()) {
    std::uniform_int_distribution<size_t> pick(0, d.scored.size() - 1);
    for (int64_t i = 0; i < o.scored_per_step; ++i) b.scored.push_back(d.scored[pick(rng)]);
  }
  // Drawn last, so runs without them draw exactly what they drew before.
  if (!d.teacher_only.empty() && o.teacher_per_step > 0) {
    std::uniform_int_distribution<size_t> pick(0, d.teacher_only.size() - 1);
    for (int64_t i = 0; i < o.teacher_per_step; ++i) b.extra.push_back(d.teacher_only[pick(rng)]);
  }
  return b;
}

// Spearman of cos(a, b) against the gold scores, of the pooled vectors, and
// (side non-null) of each side vector in side->vectors (RW standardised over
// the validation sentences).
double ValidationSpearman(Encoder& enc, const EmbedTrainData& d, SideVectors* side = nullptr,
                          std::map<std::string, double>* side_spearman = nullptr) {
  if (d.validation.empty()) return 0;
  at::NoGradGuard no_grad;
  std::vector<int32_t> ids;
  for (const auto& p : d.validation) {
    ids.push_back(p.a);
    ids.push_back(p.b);
  }
  std::vector<double> gold;
  for (const auto& p : d.validation) gold.push_back(p.score);
  auto spearman = [&](const at::Tensor& e) {
    at::Tensor cos = (e.slice(0, 0, e.size(0), 2) * e.slice(0, 1, e.size(0), 2)).sum(-1).to(at::kDouble).contiguous();
    return Spearman(std::vector<double>(cos.data_ptr<double>(), cos.data_ptr<double>() + cos.numel()), gold);
  };
  const at::Tensor e = L2Normalize(enc.Encode(d.sentences, ids, false, nullptr, side));
  if (side != nullptr && side_spearman != nullptr)
    for (const auto& [name, v] : side->vectors)
      (*side_spearman)[name] = spearman(name == "rw" ? StandardizedUnit(v) : L2Normalize(v));
  return spearman(e);
}

}  // namespace

std::vector<float> LogIdfTokenWeights(const std::vector<std::vector<int32_t>>& sentences, int64_t vocab) {
  std::vector<int64_t> df(static_cast<size_t>(vocab), 0), seen(static_cast<size_t>(vocab), -1);
  for (size_t i = 0; i < sentences.size(); ++i)
    for (int32_t id : sentences[i])
      if (id >= 0 && id < vocab && seen[id] != static_cast<int64_t>(i)) {
        seen[id] = static_cast<int64_t>(i);
        ++df[id];
      }
  std::vector<float> out(static_cast<size_t>(vocab));
  const double n = static_cast<double>(sentences.size());
  for (int64_t v = 0; v < vocab; ++v) out[v] = static_cast<float>(std::log(std::log((1 + n) / (1.0 + df[v])) + 1));
  return out;
}

struct EmbedTrainer::Impl {
  Impl(const EmbedTrainData& d, const EmbedTrainOptions& options, const ModelConfig& config)
      : data(d), o(options), c(config), state_dir(options.out_dir) {}

  const EmbedTrainData& data;
  const EmbedTrainOptions o;
  const ModelConfig c;
  TrainStateDir state_dir;
  std::unique_ptr<Encoder> enc;
  std::unique_ptr<torch::optim::AdamW> opt;
  std::vector<at::Tensor> trainable;
  std::vector<std::vector<int32_t>> by_source;  // pair indices per source
  at::Tensor teacher;                           // [rows, teacher_dim], or undefined
  // The direct distillation term's map from the pooled vector's neural part
  // into the teacher's space [teacher_dim, out_dim], trained at the pooler's
  // rate without weight decay; defined only when the two dimensions differ
  // and the direct term is on. Training-only: the exported model has no use
  // for it.
  at::Tensor projection;
  std::vector<double> group_lr;                 // each optimizer group's peak rate
  bool lexical_target = false;                  // the match term's target is TF-IDF
  std::vector<float> idf;                       // per vocabulary entry (lexical_target)
  SideVectors side;                             // the side vectors a term trains
  bool any_side = false;
  json state;                                   // state.json: run, history, step, Spearmans
  EmbedTrainResult result;
  int64_t sentences_seen = 0;                   // since Open

  void Log(const std::string& line) const {
    if (o.log) o.log(line);
  }

  // TF-IDF rows of the step's texts (the lexical match target): idf over
  // every training sentence, term counts of the first max_tokens tokens.
  at::Tensor TfidfCosines(const std::vector<int32_t>& ids) const {
    at::Tensor t = at::zeros({static_cast<int64_t>(ids.size()), c.vocab_size}, at::kFloat);
    float* tp = t.data_ptr<float>();
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto& sent = data.sentences[ids[i]];
      const size_t n = std::min<size_t>(sent.size(), static_cast<size_t>(o.max_tokens));
      for (size_t k = 0; k < n; ++k) tp[i * c.vocab_size + sent[k]] += idf[sent[k]];
    }
    t = L2Normalize(t);
    return at::matmul(t, t.t());
  }

  bool NeedsProjection() const {
    return teacher_dim() > 0 && o.distill_weight > 0 && teacher_dim() != o.pooler.out_dim;
  }
  int64_t teacher_dim() const { return data.teacher.empty() ? 0 : data.teacher_dim; }

  // The projection's start: the ridge map from the student's neural part to
  // the teacher's vectors over the first kProjectionFitRows sentences that
  // have one, as the model is before the first step.
  void FitProjection() {
    constexpr size_t kProjectionFitRows = 16384, kChunk = 256;  // 4096 rows overfit 512 inputs
    at::NoGradGuard no_grad;
    std::vector<int32_t> ids;
    std::vector<int64_t> trows;
    for (size_t i = 0; i < data.sentences.size() && ids.size() < kProjectionFitRows; ++i)
      if (data.teacher_row[i] >= 0) {
        ids.push_back(static_cast<int32_t>(i));
        trows.push_back(data.teacher_row[i]);
      }
    std::vector<at::Tensor> parts;
    for (size_t i = 0; i < ids.size(); i += kChunk) {
      const std::vector<int32_t> chunk(ids.begin() + i, ids.begin() + std::min(ids.size(), i + kChunk));
      at::Tensor pooled = enc->Encode(data.sentences, chunk, false, nullptr, nullptr);
      parts.push_back(L2Normalize(pooled.narrow(1, 0, o.pooler.out_dim)));
    }
    const at::Tensor s = at::cat(parts), t = teacher_rows().index_select(0, at::tensor(trows));
    projection = RidgeMap(s, t);
    const double fit = (L2Normalize(at::matmul(s, projection.t())) * t).sum(-1).mean().item<double>();
    Log("distillation projection " + std::to_string(o.pooler.out_dim) + " -> " + std::to_string(teacher_dim()) +
        " fitted on " + std::to_string(ids.size()) + " sentences: mean cosine to the teacher " + Fmt("%.3f", fit));
  }
  at::Tensor teacher_rows() const {
    return at::from_blob(const_cast<float*>(data.teacher.data()),
                         {static_cast<int64_t>(data.teacher.size()) / data.teacher_dim, data.teacher_dim}, at::kFloat);
  }
  Status SaveProjection(const std::string& path) const {
    return WriteSafetensors(path, {F32TensorToWrite("projection", projection)});
  }
  Result<at::Tensor> LoadProjection(const std::string& path) const {
    MOEEDB_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
    const TensorView* v = file->Find("projection");
    if (v == nullptr || v->dtype != DType::kF32 || v->shape != std::vector<int64_t>{teacher_dim(), o.pooler.out_dim})
      return Status::Corruption(path + ": no " + std::to_string(teacher_dim()) + " x " + std::to_string(o.pooler.out_dim) +
                                " F32 tensor 'projection'");
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor mapped, TensorFromView(*v));
    return mapped.clone();  // the file is unmapped when `file` goes
  }

  // Loads the start weights (or the resumed state) and builds the optimizer.
  Status Start(bool resume) {
    enc = std::make_unique<Encoder>(c, o);
    json run = {{"seed", o.seed},           {"steps", o.steps},       {"freeze_lm", o.freeze_lm},
                {"lr_lm", o.lr_lm},         {"lr_pooler", o.lr_pooler}, {"rw_weight", o.rw_weight},
                {"causal", o.causal},       {"pooler", json::parse(o.pooler.ToJson())},
                {"pairs", data.pairs.size()}, {"scored", data.scored.size()},
                {"sentences", data.sentences.size()}, {"model_config", c.json_text}};
    // Keys added later join only when set, so earlier states still resume.
    if (o.rw_pooling != RwPooling::kLast) run["rw_pooling"] = kRwPoolings.Name(o.rw_pooling);
    if (o.hs_pooling_weight > 0) run["hs_pooling_weight"] = o.hs_pooling_weight;
    if (o.side_match_weight > 0) run["side_match_weight"] = o.side_match_weight;
    if (o.side_match_target == MatchTarget::kLexical) run["side_match_target"] = "lexical";
    const bool projected = NeedsProjection();
    if (projected) run["distill_projection"] = "ridge fit, trained";
    if (resume) {
      MOEEDB_ASSIGN_OR_RETURN(state, state_dir.ReadState());
      if (state.value("run", json()) != run)
        return Status::InvalidArgument(state_dir.File("") +
                                       " was written by a run with other data, options or model; remove it to start over");
      MOEEDB_RETURN_IF_ERROR(enc->net().Load(state_dir.File("params.safetensors")));
      MOEEDB_ASSIGN_OR_RETURN(auto pooler, TrainedPooler::LoadDir(state_dir.File("")));
      for (const auto& [name, t] : pooler->weights()) enc->pooler()[name] = t.clone().set_requires_grad(true);
      result.step = state["step"].get<int64_t>();
      result.initial_val_spearman = state["initial_val_spearman"].get<double>();
      result.val_spearman = state.value("val_spearman", result.initial_val_spearman);
      if (projected) {
        MOEEDB_ASSIGN_OR_RETURN(projection, LoadProjection(state_dir.File("projection.safetensors")));
      }
    } else {
      MOEEDB_RETURN_IF_ERROR(enc->net().Load((fs::path(o.model_dir) / "model.safetensors").string()));
      enc->InitPooler(o.seed);
      // A start folder that ships a pooler of the same spec (an earlier
      // stage's output) is continued rather than replaced; one without the
      // lexical channel this run adds is continued with a new channel.
      if (TrainedPooler::ExistsIn(o.model_dir)) {
        MOEEDB_ASSIGN_OR_RETURN(auto start, TrainedPooler::LoadDir(o.model_dir));
        PoolerSpec without_lexical = o.pooler;
        without_lexical.lexical_dim = start->spec().lexical_dim;
        if (start->spec().ToJson() == without_lexical.ToJson() &&
            (start->spec().lexical_dim == 0 || start->spec().lexical_dim == o.pooler.lexical_dim)) {
          enc->SetPooler(start->weights());
          Log("starting from the pooler in " + o.model_dir +
              (start->spec().lexical_dim != o.pooler.lexical_dim ? " (with a new lexical channel)" : ""));
        } else {
          Log("the pooler in " + o.model_dir + " has another spec: starting a new one");
        }
      }
      state = {{"run", run}, {"history", json::array()}};
      if (projected) FitProjection();
    }
    std::vector<at::Tensor> decay, no_decay, pooler_params;
    auto& params = enc->net().params();
    for (size_t i = 0; i < params.size(); ++i) {
      if (o.freeze_lm) {
        params[i].set_requires_grad(false);
        continue;
      }
      const auto& spec = enc->net().specs()[i];
      (spec.shape.size() >= 2 && spec.name != "model.embed_tokens.weight" ? decay : no_decay).push_back(params[i]);
    }
    for (auto& [name, t] : enc->pooler()) pooler_params.push_back(t);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    auto adamw = [&](double lr, double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(lr).betas({0.9, 0.999}).weight_decay(wd));
    };
    groups.emplace_back(pooler_params, adamw(o.lr_pooler, o.weight_decay));
    group_lr = {o.lr_pooler};
    if (!o.freeze_lm) {
      groups.emplace_back(decay, adamw(o.lr_lm, o.weight_decay));
      groups.emplace_back(no_decay, adamw(o.lr_lm, 0.0));
      group_lr.insert(group_lr.end(), {o.lr_lm, o.lr_lm});
    }
    if (projected) {  // last, so the groups before it are as in runs without one
      projection.set_requires_grad(true);
      groups.emplace_back(std::vector<at::Tensor>{projection}, adamw(o.lr_pooler, 0.0));
      group_lr.push_back(o.lr_pooler);
    }
    opt = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(o.lr_pooler));
    if (resume) torch::load(*opt, state_dir.File("optimizer.pt"));
    trainable = pooler_params;
    trainable.insert(trainable.end(), decay.begin(), decay.end());
    trainable.insert(trainable.end(), no_decay.begin(), no_decay.end());
    if (projected) trainable.push_back(projection);

    std::map<int32_t, std::vector<int32_t>> sources;
    for (size_t i = 0; i < data.pairs.size(); ++i) sources[data.pairs[i].source].push_back(static_cast<int32_t>(i));
    for (auto& [src, list] : sources) by_source.push_back(std::move(list));
    if (!data.teacher.empty()) teacher = teacher_rows();
    lexical_target = o.side_match_weight > 0 && o.side_match_target == MatchTarget::kLexical;
    if (lexical_target)
      for (float lw : LogIdfTokenWeights(data.sentences, c.vocab_size)) idf.push_back(std::exp(lw));
    // The side vectors a term trains are read in every step and watched on
    // the validation pairs.
    side.rw = o.rw_weight > 0;
    side.hs_poolings = o.hs_pooling_weight > 0 || o.side_match_weight > 0;
    side.rw_pooling = o.rw_pooling;
    any_side = side.rw || side.hs_poolings;
    if (!resume) {
      const EmbedValidation v = Evaluate();
      result.initial_val_spearman = result.val_spearman = v.spearman;
      state["initial_val_spearman"] = result.initial_val_spearman;
      Log("before training: validation Spearman " + Describe(v));
    } else {
      Log("resuming at step " + std::to_string(result.step) + " of " + std::to_string(o.steps));
    }
    return Status::OK();
  }

  EmbedValidation Evaluate() {
    EmbedValidation v;
    v.spearman = ValidationSpearman(*enc, data, any_side ? &side : nullptr, &v.side);
    side.vectors.clear();
    return v;
  }

  static std::string Describe(const EmbedValidation& v) {
    std::string text = Fmt("%.4f", v.spearman);
    for (const auto& [name, r] : v.side) text += ", " + name + " " + Fmt("%.4f", r);
    return text;
  }

  std::map<std::string, double> Step() {
    const double sched = WarmupCosine(1.0, o.min_lr_ratio, o.warmup_steps, result.step, o.steps);
    auto& pg = opt->param_groups();
    for (size_t g = 0; g < pg.size(); ++g)
      static_cast<torch::optim::AdamWOptions&>(pg[g].options()).lr(group_lr[g] * sched);

    const StepBatch b = DrawBatch(data, by_source, o, result.step);
    // Every sentence of the step once; slot_of maps a sentence to its row.
    std::vector<int32_t> ids;
    std::map<int32_t, int64_t> slot_of;
    auto slot = [&](int32_t s) {
      auto [it, fresh] = slot_of.emplace(s, static_cast<int64_t>(ids.size()));
      if (fresh) ids.push_back(s);
      return it->second;
    };
    std::vector<int64_t> anchor, cand;
    std::vector<int32_t> cand_sentence;
    for (const auto& p : b.pairs) {
      anchor.push_back(slot(p.anchor));
      cand.push_back(slot(p.positive));
      cand_sentence.push_back(p.positive);
    }
    for (const auto& p : b.pairs)
      if (p.negative >= 0) {
        cand.push_back(slot(p.negative));
        cand_sentence.push_back(p.negative);
      }
    std::vector<int64_t> sa, sb;
    for (const auto& p : b.scored) {
      sa.push_back(slot(p.a));
      sb.push_back(slot(p.b));
    }
    for (int32_t s : b.extra) slot(s);  // distillation only
    at::Tensor aux;
    const at::Tensor pooled = enc->Encode(data.sentences, ids, true, &aux, any_side ? &side : nullptr);
    at::Tensor e = L2Normalize(pooled);
    // The teacher's vectors match the attention-pooled part; the lexical
    // channel (if any) joins the whole vector's similarity structure.
    at::Tensor e_neural = o.pooler.lexical_dim > 0 ? L2Normalize(pooled.narrow(1, 0, o.pooler.out_dim)) : e;
    sentences_seen += static_cast<int64_t>(ids.size());
    at::Tensor loss = o.freeze_lm ? at::zeros({}, at::kFloat) : o.aux_loss_coef * aux;
    std::map<std::string, at::Tensor> parts;
    // InfoNCE over the pairs and CoSENT over the scored pairs, of unit vectors v.
    auto contrastive = [&](const at::Tensor& v, const std::string& prefix, double weight) {
      if (!b.pairs.empty()) {
        const int64_t P = static_cast<int64_t>(b.pairs.size()), C = static_cast<int64_t>(cand.size());
        at::Tensor logits =
            at::matmul(v.index_select(0, at::tensor(anchor)), v.index_select(0, at::tensor(cand)).t()) / o.temperature;
        at::Tensor mask = at::zeros({P, C}, at::kBool);
        auto* m = mask.data_ptr<bool>();
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < C; ++j) {
            if (j == i) continue;
            const bool same_group = j < P && b.pairs[i].group >= 0 && b.pairs[i].group == b.pairs[j].group;
            const bool same_text = cand_sentence[j] == b.pairs[i].positive || cand_sentence[j] == b.pairs[i].anchor;
            m[i * C + j] = same_group || same_text;
          }
        logits = logits.masked_fill(mask, -std::numeric_limits<float>::infinity());
        parts[prefix + "nce"] = weight * at::cross_entropy_loss(logits, at::arange(P, at::kLong));
      }
      if (!b.scored.empty()) {
        at::Tensor cos = (v.index_select(0, at::tensor(sa)) * v.index_select(0, at::tensor(sb))).sum(-1) * o.cosent_scale;
        at::Tensor score = at::empty({static_cast<int64_t>(b.scored.size())}, at::kFloat);
        for (size_t i = 0; i < b.scored.size(); ++i) score[static_cast<int64_t>(i)] = b.scored[i].score;
        at::Tensor diff = cos.unsqueeze(0) - cos.unsqueeze(1);  // [i, j] = cos_j - cos_i
        at::Tensor higher = score.unsqueeze(1) > score.unsqueeze(0);
        at::Tensor terms = diff.masked_select(higher);
        parts[prefix + "cosent"] = weight * at::logsumexp(at::cat({at::zeros({1}, at::kFloat), terms}), 0);
      }
    };
    contrastive(e, "", 1.0);
    const at::Tensor pooled_cos = o.side_match_weight == 0 ? at::Tensor()
                                  : lexical_target         ? TfidfCosines(ids)
                                                           : at::matmul(e, e.t()).detach();
    for (const auto& [name, v] : side.vectors) {
      if (name == "rw") {
        contrastive(StandardizedUnit(v), "rw_", o.rw_weight);
        continue;
      }
      const at::Tensor u = L2Normalize(v);
      if (o.hs_pooling_weight > 0) contrastive(u, name.substr(3) + "_", o.hs_pooling_weight);
      if (o.side_match_weight > 0)
        parts[name.substr(3) + "_match"] = o.side_match_weight * (at::matmul(u, u.t()) - pooled_cos).pow(2).mean();
    }
    side.vectors.clear();
    if (teacher.defined()) {
      std::vector<int64_t> rows, trows;
      for (size_t i = 0; i < ids.size(); ++i)
        if (data.teacher_row[ids[i]] >= 0) {
          rows.push_back(static_cast<int64_t>(i));
          trows.push_back(data.teacher_row[ids[i]]);
        }
      if (rows.size() >= 2) {
        at::Tensor s = e.index_select(0, at::tensor(rows)), t = teacher.index_select(0, at::tensor(trows));
        if (o.distill_weight > 0) {
          at::Tensor student = e_neural.index_select(0, at::tensor(rows));
          if (projection.defined()) student = L2Normalize(at::matmul(student, projection.t()));
          parts["distill"] = o.distill_weight * (1 - (student * t).sum(-1)).mean();
        }
        parts["matrix"] = o.distill_matrix_weight * (at::matmul(s, s.t()) - at::matmul(t, t.t())).pow(2).mean();
      }
    }
    for (auto& [name, v] : parts) loss = loss + v;
    opt->zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(trainable, o.clip_norm);
    opt->step();
    ++result.step;
    std::map<std::string, double> out;
    for (auto& [name, v] : parts) out[name] = v.item<double>();
    out["loss"] = loss.item<double>();
    out["lr_scale"] = sched;
    return out;
  }

  Status Checkpoint() {
    state["step"] = result.step;
    state["val_spearman"] = result.val_spearman;
    return state_dir.Commit(state, [&](const std::string& dir) -> Status {
      MOEEDB_RETURN_IF_ERROR(enc->net().Save((fs::path(dir) / "params.safetensors").string(), DType::kF32));
      MOEEDB_RETURN_IF_ERROR(SavePooler(dir, o.pooler, enc->pooler()));
      if (projection.defined()) MOEEDB_RETURN_IF_ERROR(SaveProjection((fs::path(dir) / "projection.safetensors").string()));
      torch::save(*opt, (fs::path(dir) / "optimizer.pt").string());
      return Status::OK();
    });
  }

  Status Export() {
    const fs::path out(o.out_dir);
    MOEEDB_RETURN_IF_ERROR(enc->net().Save((out / "model.safetensors").string(), DType::kF16));
    json cfg = json::parse(c.json_text);
    if (!o.causal) cfg["is_causal"] = false;
    MOEEDB_RETURN_IF_ERROR(WriteFileAtomic((out / "config.json").string(), cfg.dump(2) + "\n"));
    std::error_code ec;
    if (fs::exists(fs::path(o.model_dir) / "tokenizer.json") && fs::absolute(o.model_dir) != fs::absolute(o.out_dir))
      fs::copy_file(fs::path(o.model_dir) / "tokenizer.json", out / "tokenizer.json", fs::copy_options::overwrite_existing,
                    ec);
    if (ec) return Status::IOError("cannot copy tokenizer.json: " + ec.message());
    MOEEDB_RETURN_IF_ERROR(SavePooler(o.out_dir, o.pooler, enc->pooler()));
    return WriteFileAtomic((out / "embed_training_log.json").string(), state.dump(1));
  }
};

EmbedTrainer::EmbedTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EmbedTrainer::~EmbedTrainer() = default;
int64_t EmbedTrainer::step() const { return impl_->result.step; }
const EmbedTrainOptions& EmbedTrainer::options() const { return impl_->o; }

Result<std::unique_ptr<EmbedTrainer>> EmbedTrainer::Open(const EmbedTrainData& data, const EmbedTrainOptions& options) {
  MOEEDB_ASSIGN_OR_RETURN(ModelConfig c,
                          ModelConfig::FromFile((fs::path(options.model_dir) / "config.json").string()));
  MOEEDB_RETURN_IF_ERROR(TrainNet::CheckTrainable(c));
  MOEEDB_RETURN_IF_ERROR(options.Validate());
  EmbedTrainOptions o = options;
  if (o.pooler.hidden == 0) {
    MOEEDB_RETURN_IF_ERROR(o.FitPooler(c, data.teacher_dim));
    if (o.pooler.token_pooling == TokenPooling::kWeighted && o.token_log_weight_init.empty())
      o.token_log_weight_init = LogIdfTokenWeights(data.sentences, c.vocab_size);
  }
  if (o.pooler.hidden != c.hidden_size || o.pooler.layer_rows != c.num_layers + 1)
    return Status::InvalidArgument("the pooler's hidden size and layer rows must match the model");
  if (o.pooler.router_rows != 0 && (o.pooler.router_rows != c.num_layers || o.pooler.router_dim != c.num_experts))
    return Status::InvalidArgument("a pooler that reads RW has one row per MoE layer of num_experts logits");
  if (o.pooler.token_pooling == TokenPooling::kWeighted && o.pooler.vocab != c.vocab_size)
    return Status::InvalidArgument("a weighted pooler has one token weight per vocabulary entry");
  if (!o.token_log_weight_init.empty() && (o.pooler.token_pooling != TokenPooling::kWeighted ||
                                           static_cast<int64_t>(o.token_log_weight_init.size()) != c.vocab_size))
    return Status::InvalidArgument("token_log_weight_init needs a weighted pooler and one value per vocabulary entry");
  MOEEDB_RETURN_IF_ERROR(o.pooler.Validate());
  MOEEDB_RETURN_IF_ERROR(CheckData(data, c, o));
  if (o.threads > 0) at::set_num_threads(o.threads);
  auto impl = std::make_unique<Impl>(data, o, c);
  MOEEDB_RETURN_IF_ERROR(impl->state_dir.Open());
  const bool resume = impl->state_dir.HasState();
  MOEEDB_RETURN_IF_ERROR(CatchTrainingErrors<bool>([&]() -> Result<bool> {
                           MOEEDB_RETURN_IF_ERROR(impl->Start(resume));
                           return true;
                         }).status());
  return std::unique_ptr<EmbedTrainer>(new EmbedTrainer(std::move(impl)));
}

Result<std::map<std::string, double>> EmbedTrainer::Step() {
  if (impl_->result.step >= impl_->o.steps) return Status::InvalidArgument("the schedule is done");
  return CatchTrainingErrors<std::map<std::string, double>>(
      [&]() -> Result<std::map<std::string, double>> { return impl_->Step(); });
}

Result<EmbedValidation> EmbedTrainer::Evaluate() {
  return CatchTrainingErrors<EmbedValidation>([&]() -> Result<EmbedValidation> { return impl_->Evaluate(); });
}

Status EmbedTrainer::Checkpoint() {
  return CatchTrainingErrors<bool>([&]() -> Result<bool> {
           MOEEDB_RETURN_IF_ERROR(impl_->Checkpoint());
           return true;
         }).status();
}

Status EmbedTrainer::Export() {
  if (impl_->result.step < impl_->o.steps) return Status::InvalidArgument("the schedule is not done");
  return CatchTrainingErrors<bool>([&]() -> Result<bool> {
           MOEEDB_RETURN_IF_ERROR(impl_->Export());
           return true;
         }).status();
}

Result<EmbedTrainResult> EmbedTrainer::Run() {
  Impl& m = *impl_;
  const EmbedTrainOptions& o = m.o;
  EmbedTrainResult& result = m.result;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const int64_t first_step = result.step, first_seen = m.sentences_seen;
  std::map<std::string, double> window;
  int64_t window_n = 0;
  while (result.step < o.steps) {
    MOEEDB_ASSIGN_OR_RETURN(auto parts, Step());
    const double sched = parts["lr_scale"];
    parts.erase("lr_scale");
    for (const auto& [name, v] : parts) window[name] += v;
    ++window_n;
    const bool last = result.step == o.steps;
    const bool out_of_time = (o.minutes > 0 && elapsed() > o.minutes * 60.0) ||
                             (o.stop_after > 0 && result.step - first_step >= o.stop_after);
    if (result.step % 20 == 0 || last) {
      const double secs = elapsed();
      std::string line = "step " + std::to_string(result.step) + "/" + std::to_string(o.steps);
      json h = {{"step", result.step}};
      for (auto& [name, v] : window) {
        line += " " + name + " " + Fmt("%.4f", v / window_n);
        h[name] = v / window_n;
      }
      const double eta = (o.steps - result.step) * secs / static_cast<double>(result.step - first_step);
      m.Log(line + " lr x" + Fmt("%.3f", sched) + " " + Fmt("%.1f", (m.sentences_seen - first_seen) / secs) +
            " sentences/s ETA " + Fmt("%.1f", eta / 60.0) + " min");
      m.state["history"].push_back(h);
      window.clear();
      window_n = 0;
    }
    if (result.step % o.eval_every == 0 || last) {
      MOEEDB_ASSIGN_OR_RETURN(EmbedValidation v, Evaluate());
      json h = {{"step", result.step}};
      for (const auto& [name, r] : v.side) h["val_" + name + "_spearman"] = r;
      result.val_spearman = v.spearman;
      h["val_spearman"] = v.spearman;
      m.state["history"].push_back(h);
      m.Log("step " + std::to_string(result.step) + " validation Spearman " + Impl::Describe(v));
    }
    if (result.step % o.checkpoint_every == 0 || last || out_of_time) MOEEDB_RETURN_IF_ERROR(Checkpoint());
    if (out_of_time && !last) {
      m.Log("budget reached at step " + std::to_string(result.step) + "; run the same command to resume");
      break;
    }
  }
  result.sentences_per_second = static_cast<double>(m.sentences_seen - first_seen) / std::max(elapsed(), 1e-9);
  if (result.step >= o.steps) {
    MOEEDB_RETURN_IF_ERROR(Export());
    result.finished = true;
  }
  return result;
}

Result<EmbedTrainResult> TrainEmbedding(const EmbedTrainData& data, const EmbedTrainOptions& options) {
  MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<EmbedTrainer> trainer, EmbedTrainer::Open(data, options));
  return trainer->Run();
}

}  // namespace moeedb
