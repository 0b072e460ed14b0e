// moeedb train tokenizer | train model: the embedded default model is made by
// these two commands (MODEL_CARD.md in models/moeedb-tiny has the exact calls).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/atomic_file.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/bpe_trainer.h"
#include "engine/train/lm_trainer.h"
#include "base/csv.h"
#include "base/png_plot.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"

namespace moeedb::cli {

namespace fs = std::filesystem;

namespace {

// Files from --corpus (comma-separated) and the positional arguments.
std::vector<std::string> CorpusFiles(const Args& args) {
  std::vector<std::string> files;
  std::stringstream ss(args.Get("corpus"));
  std::string f;
  while (std::getline(ss, f, ','))
    if (!f.empty()) files.push_back(f);
  for (const auto& p : args.positional()) files.push_back(p);
  return files;
}

// A corpus file as documents. Plain text: paragraphs (blank-line separated),
// or lines when `line_documents` (books stored one paragraph per line, such as
// the OpenStax texts), each ending with its newline, the last one of the file
// ending the document stream with <|endoftext|>. CSV and TSV: every field that
// contains a space (the sentences; labels, scores and headers have none), one
// document each.
struct Document {
  std::string text;
  bool ends_with_eos = false;
};

Result<std::vector<Document>> ReadCorpusFile(const std::string& path, bool line_documents) {
  std::vector<Document> docs;
  if (fs::path(path).extension() == ".tsv") {
    std::ifstream tsv(path, std::ios::binary);
    if (!tsv) return Status::NotFound("cannot read corpus file " + path);
    std::string line, field;
    while (std::getline(tsv, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::stringstream fields(line);
      while (std::getline(fields, field, '\t'))
        if (field.find(' ') != std::string::npos) docs.push_back({field, true});
    }
    return docs;
  }
  if (fs::path(path).extension() == ".csv") {
    MOEEDB_ASSIGN_OR_RETURN(auto rows, ReadCsv(path));
    for (const auto& row : rows)
      for (const auto& field : row)
        if (field.find(' ') != std::string::npos) docs.push_back({field, true});
    return docs;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read corpus file " + path);
  std::string line, para;
  auto flush = [&] {
    if (!para.empty()) docs.push_back({para + "\n", false});
    para.clear();
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      flush();
    } else {
      para += line;
      para.push_back('\n');
      if (line_documents) flush();
    }
  }
  flush();
  if (!docs.empty()) docs.back().ends_with_eos = true;
  return docs;
}

// loss_curve.png from training_log.json: training loss (blue, every 20
// steps) and validation loss (red, every eval) against the step.
Status PlotLossCurve(const std::string& out_dir) {
  MOEEDB_ASSIGN_OR_RETURN(auto log, ReadTrainingLog((fs::path(out_dir) / "training_log.json").string()));
  const auto train = WithHistory({{}, {}, 40, 90, 200}, log, "train_loss");
  const auto val = WithHistory({{0.0}, {log.value("untrained_val_loss", 0.0)}, 210, 40, 40}, log, "val_loss");
  return WriteLinePlotPng((fs::path(out_dir) / "loss_curve.png").string(), {train, val},
                                {"language model loss (blue train, red validation)", "step", "loss"});
}

}  // namespace

int RunTrainTokenizer(const Args& args) {
  const auto files = CorpusFiles(args);
  if (files.empty()) return UsageError("train tokenizer", "--corpus is required");
  const long long vocab = args.Int("vocab");
  const long long minf = args.Int("min-frequency");
  BpeTrainerOptions opt;
  opt.vocab_size = vocab;
  opt.min_frequency = minf;
  BpeTrainer trainer(opt);
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& f : files) {
    auto docs = ReadCorpusFile(f, args.Has("line-documents"));
    if (!docs.ok()) return Fail("train tokenizer", docs.status().message());
    for (const auto& d : *docs) {
      Status s = trainer.AddText(d.text);
      if (!s.ok()) return Fail("train tokenizer", f + ": " + s.message());
    }
  }
  BpeTrainingStats stats;
  auto json = trainer.Train(&stats);
  if (!json.ok()) return Fail("train tokenizer", json.status().message());
  const std::string out = args.Get("out");
  if (Status s = WriteFileAtomic(out, *json); !s.ok()) return Fail("train tokenizer", s.message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "train tokenizer: " << stats.words << " words (" << stats.unique_words << " distinct), "
            << stats.merges << " merges, vocabulary " << stats.vocab_size << ", " << secs << " s -> " << out
            << std::endl;
  return 0;
}

int RunTrainModel(const Args& args) {
  const auto files = CorpusFiles(args);
  if (files.empty()) return UsageError("train model", "--corpus is required");
  LmTrainOptions o;
  o.out_dir = args.Get("out");
  o.steps = args.Int("steps");
  o.batch_size = args.Int("batch");
  o.seq_len = args.Int("seq");
  o.warmup_steps = args.Int("warmup");
  const int64_t val_every = args.Int("val-every");
  o.eval_every = args.Int("eval-every");
  o.seed = static_cast<uint64_t>(args.Int("seed"));
  o.threads = static_cast<int>(args.Int("threads"));
  try {
    if (args.Has("minutes")) o.minutes = std::stod(args.Get("minutes"));
    if (args.Has("lr")) o.peak_lr = std::stod(args.Get("lr"));
  } catch (const std::exception&) {
    return UsageError("train model", "--minutes and --lr take numbers");
  }
  if (o.steps == 0 && o.minutes <= 0) return UsageError("train model", "give --steps N or --minutes M");
  o.log = [](const std::string& line) { std::cerr << "train model: " << line << std::endl; };

  auto tok = LoadTokenizer(args.Get("tokenizer"), "");
  if (!tok.ok()) return Fail("train model", tok.status().message());
  auto config = ModelConfig::FromFile(args.Get("config"));
  if (!config.ok()) return Fail("train model", config.status().message());
  if ((*tok)->vocab_size() > config->vocab_size)
    return Fail("train model", "the tokenizer has " + std::to_string((*tok)->vocab_size()) +
                                   " ids but the config's vocab_size is " + std::to_string(config->vocab_size));
  const auto eos = (*tok)->TokenId("<|endoftext|>");
  if (!eos) return Fail("train model", "the tokenizer has no <|endoftext|> token");

  std::vector<int32_t> train, val;
  int64_t doc_index = 0;
  for (const auto& f : files) {
    auto docs = ReadCorpusFile(f, args.Has("line-documents"));
    if (!docs.ok()) return Fail("train model", docs.status().message());
    for (const auto& d : *docs) {
      auto ids = (*tok)->Encode(d.text, /*add_special=*/false);
      if (!ids.ok()) return Fail("train model", f + ": " + ids.status().message());
      auto& stream = (doc_index++ % val_every == 0) ? val : train;
      stream.insert(stream.end(), ids->begin(), ids->end());
      if (d.ends_with_eos) stream.push_back(*eos);
    }
  }
  std::cerr << "train model: " << doc_index << " documents, " << train.size() << " training and " << val.size()
            << " validation tokens" << std::endl;
  auto r = TrainLanguageModel(args.Get("config"), train, val, o);
  if (!r.ok()) return Fail("train model", r.status().message());
  if (!r->finished) {
    std::cerr << "train model: stopped at step " << r->step << " of " << r->total_steps
              << "; run the same command again to continue" << std::endl;
    return 3;
  }
  std::error_code ec;
  fs::copy_file(args.Get("tokenizer"), fs::path(o.out_dir) / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
  if (ec) return Fail("train model", "cannot copy the tokenizer: " + ec.message());
  if (Status s = PlotLossCurve(o.out_dir); !s.ok()) std::cerr << "train model: no loss plot: " << s.message() << std::endl;
  std::cout << "{\"steps\":" << r->step << ",\"untrained_val_loss\":" << r->untrained_val_loss
            << ",\"untrained_val_perplexity\":" << std::exp(r->untrained_val_loss) << ",\"val_loss\":" << r->val_loss
            << ",\"val_perplexity\":" << std::exp(r->val_loss) << ",\"tokens_per_second\":" << r->tokens_per_second
            << "}" << std::endl;
  return 0;
}

}  // namespace moeedb::cli
