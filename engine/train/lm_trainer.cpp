#include "engine/train/lm_trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/types.h>  // before clip_grad.h, which does not include what it uses
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_map>

#include "base/atomic_file.h"
#include "engine/model/checkpoint_spec.h"
#include "engine/model/model.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/train/train_net.h"
#include "engine/train/train_state.h"

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Windows [off, off + T] (inputs and shifted targets) for batch `step`.
at::Tensor SampleBatch(const std::vector<int32_t>& tokens, int64_t B, int64_t T, uint64_t seed, int64_t step) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(step) + 1);
  std::uniform_int_distribution<int64_t> pick(0, static_cast<int64_t>(tokens.size()) - T - 2);
  at::Tensor out = at::empty({B, T + 1}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t off = pick(rng);
    for (int64_t t = 0; t <= T; ++t) p[b * (T + 1) + t] = tokens[off + t];
  }
  return out;
}

// Non-overlapping validation windows from the start of the stream.
at::Tensor ValidationWindows(const std::vector<int32_t>& tokens, int64_t T, int64_t max_windows) {
  const int64_t n = std::min<int64_t>(max_windows, (static_cast<int64_t>(tokens.size()) - 1) / T);
  at::Tensor out = at::empty({std::max<int64_t>(n, 0), T + 1}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (int64_t w = 0; w < n; ++w)
    for (int64_t t = 0; t <= T; ++t) p[w * (T + 1) + t] = tokens[w * T + t];
  return out;
}

double LearningRate(const LmTrainOptions& o, int64_t step, int64_t total) {
  return WarmupCosine(o.peak_lr, o.min_lr_ratio, o.warmup_steps, step, total);
}

double NetValidationLoss(const TrainNet& net, const at::Tensor& windows) {
  at::NoGradGuard no_grad;
  double total = 0;
  int64_t n = 0;
  for (int64_t s = 0; s < windows.size(0); s += 8) {
    at::Tensor w = windows.narrow(0, s, std::min<int64_t>(8, windows.size(0) - s));
    const int64_t T = w.size(1) - 1;
    TrainForwardOutput out = net.Forward(w.narrow(1, 0, T));
    at::Tensor loss = at::cross_entropy_loss(out.logits.reshape({-1, out.logits.size(-1)}), w.narrow(1, 1, T).reshape({-1}),
                                             {}, at::Reduction::Sum);
    total += loss.item<double>();
    n += w.size(0) * T;
  }
  return n > 0 ? total / static_cast<double>(n) : 0;
}

std::string Fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, a);
  return buf;
}

}  // namespace

Result<LmTrainResult> TrainLanguageModel(const std::string& config_path, const std::vector<int32_t>& train_tokens,
                                         const std::vector<int32_t>& val_tokens, const LmTrainOptions& o) {
  MOEEDB_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromFile(config_path));
  const ModelConfig& c = config;
  MOEEDB_RETURN_IF_ERROR(TrainNet::CheckTrainable(c));
  if (o.out_dir.empty()) return Status::InvalidArgument("no output folder");
  if (o.steps <= 0 && o.minutes <= 0) return Status::InvalidArgument("give a step count or a time budget in minutes");
  if (o.seq_len < 2 || o.batch_size < 1) return Status::InvalidArgument("sequence length >= 2 and batch size >= 1 needed");
  if (static_cast<int64_t>(train_tokens.size()) < o.seq_len + 2 || static_cast<int64_t>(val_tokens.size()) < o.seq_len + 1)
    return Status::InvalidArgument("the training and validation streams need more than seq_len tokens each");
  for (const auto* stream : {&train_tokens, &val_tokens})
    for (int32_t id : *stream)
      if (id < 0 || id >= c.vocab_size)
        return Status::InvalidArgument("token id " + std::to_string(id) + " is outside the config's vocabulary of " +
                                       std::to_string(c.vocab_size));
  auto log = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  if (o.threads > 0) at::set_num_threads(o.threads);

  std::error_code ec;
  const fs::path out(o.out_dir);
  TrainStateDir state_dir(o.out_dir);
  MOEEDB_RETURN_IF_ERROR(state_dir.Open());

  return CatchTrainingErrors<LmTrainResult>([&]() -> Result<LmTrainResult> {
    TrainNet net(c);
    LmTrainResult result;
    json state;
    const bool resume = state_dir.HasState();
    if (resume) {
      MOEEDB_ASSIGN_OR_RETURN(state, state_dir.ReadState());
      if (state.value("seed", uint64_t{0}) != o.seed || state.value("seq_len", int64_t{0}) != o.seq_len ||
          state.value("batch_size", int64_t{0}) != o.batch_size || state.value("config", std::string()) != c.json_text)
        return Status::InvalidArgument(state_dir.File("") +
                                       " was written by a run with another config, seed, batch size or sequence "
                                       "length; remove it to start over");
      MOEEDB_RETURN_IF_ERROR(net.Load(state_dir.File("params.safetensors")));
      result.step = state["step"].get<int64_t>();
      result.total_steps = state["total_steps"].get<int64_t>();
      result.untrained_val_loss = state["untrained_val_loss"].get<double>();
      result.val_loss = state.value("val_loss", result.untrained_val_loss);
    } else {
      net.Init(o.seed);
      state = {{"seed", o.seed}, {"seq_len", o.seq_len}, {"batch_size", o.batch_size}, {"config", c.json_text},
               {"history", json::array()}};
      result.total_steps = o.steps;
    }
    auto& params = net.params();
    std::vector<at::Tensor> decay, no_decay;
    for (size_t i = 0; i < params.size(); ++i)
      (net.specs()[i].shape.size() >= 2 && net.specs()[i].name != "model.embed_tokens.weight" ? decay : no_decay)
          .push_back(params[i]);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(o.peak_lr).betas({0.9, 0.95}).weight_decay(o.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                      torch::optim::AdamWOptions(o.peak_lr).betas({0.9, 0.95}).weight_decay(0.0)));
    torch::optim::AdamW opt(std::move(groups), torch::optim::AdamWOptions(o.peak_lr).betas({0.9, 0.95}));
    if (resume) torch::load(opt, state_dir.File("optimizer.pt"));

    const at::Tensor val = ValidationWindows(val_tokens, o.seq_len, o.val_windows);
    if (!resume) {
      result.untrained_val_loss = result.val_loss = NetValidationLoss(net, val);
      state["untrained_val_loss"] = result.untrained_val_loss;
      log("untrained validation loss " + Fmt("%.4f", result.untrained_val_loss) + " (perplexity " +
          Fmt("%.1f", std::exp(result.untrained_val_loss)) + ")");
    } else {
      log("resuming at step " + std::to_string(result.step) + " of " + std::to_string(result.total_steps));
    }

    auto checkpoint = [&]() -> Status {
      state["step"] = result.step;
      state["total_steps"] = result.total_steps;
      state["val_loss"] = result.val_loss;
      return state_dir.Commit(state, [&](const std::string& dir) -> Status {
        MOEEDB_RETURN_IF_ERROR(net.Save((fs::path(dir) / "params.safetensors").string(), DType::kF32));
        torch::save(opt, (fs::path(dir) / "optimizer.pt").string());
        return Status::OK();
      });
    };

    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    const int64_t first_step = result.step;
    const int64_t tokens_per_step = o.batch_size * o.seq_len;
    double window_loss = 0;
    int64_t window_n = 0;
    double timing_start = 0;
    const int64_t kTimingFrom = first_step + 3, kTimingTo = first_step + 13;
    while (result.total_steps == 0 || result.step < result.total_steps) {
      if (result.step == kTimingFrom) timing_start = elapsed();
      if (result.total_steps == 0 && result.step == kTimingTo) {
        // Schedule length from the measured speed: the budget less a margin
        // for evaluations and checkpoints.
        const double per_step = (elapsed() - timing_start) / static_cast<double>(kTimingTo - kTimingFrom);
        result.total_steps =
            std::max<int64_t>(o.warmup_steps + 1, static_cast<int64_t>((o.minutes * 60.0 * 0.95) / per_step));
        log("schedule: " + std::to_string(result.total_steps) + " steps (" + Fmt("%.2f", per_step) + " s/step)");
      }
      const double lr = LearningRate(o, result.step, std::max<int64_t>(result.total_steps, o.warmup_steps + 1));
      for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
      at::Tensor batch = SampleBatch(train_tokens, o.batch_size, o.seq_len, o.seed, result.step);
      TrainForwardOutput f = net.Forward(batch.narrow(1, 0, o.seq_len));
      at::Tensor lm = at::cross_entropy_loss(f.logits.reshape({-1, c.vocab_size}), batch.narrow(1, 1, o.seq_len).reshape({-1}));
      at::Tensor loss = lm + o.aux_loss_coef * f.aux + o.z_loss_coef * f.zloss;
      opt.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(params, o.clip_norm);
      opt.step();
      ++result.step;
      window_loss += lm.item<double>();
      ++window_n;

      const bool last = result.total_steps > 0 && result.step == result.total_steps;
      const bool out_of_time = (o.minutes > 0 && elapsed() > o.minutes * 60.0) ||
                               (o.stop_after > 0 && result.step - first_step >= o.stop_after);
      if (result.step % 20 == 0 || last) {
        const double secs = elapsed();
        const double tps = static_cast<double>((result.step - first_step) * tokens_per_step) / secs;
        const double eta = result.total_steps > 0 ? (result.total_steps - result.step) * secs / (result.step - first_step) : 0;
        log("step " + std::to_string(result.step) + "/" + std::to_string(result.total_steps) + " loss " +
            Fmt("%.4f", window_loss / window_n) + " aux " + Fmt("%.3f", f.aux.item<double>()) + " lr " +
            Fmt("%.2e", lr) + " " + Fmt("%.0f", tps) + " tok/s ETA " + Fmt("%.1f", eta / 60.0) + " min");
        state["history"].push_back({{"step", result.step}, {"train_loss", window_loss / window_n}});
        window_loss = 0;
        window_n = 0;
      }
      if (result.step % o.eval_every == 0 || last) {
        result.val_loss = NetValidationLoss(net, val);
        state["history"].push_back({{"step", result.step}, {"val_loss", result.val_loss}});
        log("step " + std::to_string(result.step) + " validation loss " + Fmt("%.4f", result.val_loss) +
            " (perplexity " + Fmt("%.1f", std::exp(result.val_loss)) + ")");
      }
      if (result.step % o.checkpoint_every == 0 || last || out_of_time) MOEEDB_RETURN_IF_ERROR(checkpoint());
      if (out_of_time && !last) {
        log("budget reached at step " + std::to_string(result.step) + "; run the same command to resume");
        break;
      }
    }
    result.tokens_per_second = static_cast<double>((result.step - first_step) * tokens_per_step) / std::max(elapsed(), 1e-9);
    if (result.total_steps > 0 && result.step >= result.total_steps) {
      MOEEDB_RETURN_IF_ERROR(net.Save((out / "model.safetensors").string(), o.out_dtype));
      if (fs::exists(out / "model.safetensors.index.json")) fs::remove(out / "model.safetensors.index.json");
      if (fs::absolute(config_path) != fs::absolute(out / "config.json"))
        fs::copy_file(config_path, out / "config.json", fs::copy_options::overwrite_existing, ec);
      if (ec) return Status::IOError("cannot copy " + config_path + ": " + ec.message());
      MOEEDB_RETURN_IF_ERROR(WriteFileAtomic((out / "training_log.json").string(), state.dump(1)));
      result.finished = true;
    }
    return result;
  });
}

Result<double> EvaluateLoss(const std::string& model_dir, const std::vector<int32_t>& tokens, int64_t seq_len,
                            int64_t max_windows) {
  MOEEDB_ASSIGN_OR_RETURN(auto model, MoeModel::LoadDir(model_dir));
  const at::Tensor windows = ValidationWindows(tokens, seq_len, max_windows);
  if (windows.size(0) == 0) return Status::InvalidArgument("fewer than seq_len + 1 tokens to evaluate on");
  ForwardOptions fo;
  fo.want_logits = true;
  double total = 0;
  int64_t n = 0;
  for (int64_t s = 0; s < windows.size(0); s += 8) {
    const int64_t b = std::min<int64_t>(8, windows.size(0) - s);
    std::vector<std::vector<int32_t>> ids(b);
    const int64_t* p = windows.data_ptr<int64_t>();
    for (int64_t i = 0; i < b; ++i)
      for (int64_t t = 0; t < seq_len; ++t) ids[i].push_back(static_cast<int32_t>(p[(s + i) * (seq_len + 1) + t]));
    MOEEDB_ASSIGN_OR_RETURN(ForwardOutput f, model->Forward(ids, fo));
    at::Tensor target = windows.narrow(0, s, b).narrow(1, 1, seq_len).reshape({-1});
    total += at::cross_entropy_loss(f.logits.reshape({-1, f.logits.size(-1)}), target, {}, at::Reduction::Sum).item<double>();
    n += b * seq_len;
  }
  return total / static_cast<double>(n);
}

}  // namespace moeedb
