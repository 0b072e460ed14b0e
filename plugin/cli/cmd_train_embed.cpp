// moeedb train embed: trains a pooler (and optionally the whole model) of a
// language-model folder into a sentence embedder (engine/train/embed_trainer.h).
// The recipe of the shipped default is in models/moeedb-tiny/MODEL_CARD.md.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <unordered_map>

#include "base/blas_core.h"
#include "engine/embed/embedder.h"
#include "engine/model/model.h"
#include "engine/train/embed_trainer.h"
#include "base/csv.h"
#include "base/png_plot.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"
#include "plugin/cli/spec_flags.h"

namespace moeedb::cli {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> SplitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string f;
  while (std::getline(ss, f, sep))
    if (!f.empty()) out.push_back(f);
  return out;
}

std::string CleanText(const std::string& s) {
  std::string out;
  bool space = false;
  for (char ch : s) {
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
      space = !out.empty();
    } else {
      if (space) out.push_back(' ');
      space = false;
      out.push_back(ch);
    }
  }
  return out;
}

// Sentences by text, each tokenised once.
class SentenceTable {
 public:
  explicit SentenceTable(const Embedder* embedder) : embedder_(embedder) {}
  // The index of `text` (cleaned of runs of whitespace), or -1 when it is empty.
  Result<int32_t> Add(const std::string& raw) {
    const std::string text = CleanText(raw);
    if (text.empty()) return -1;
    auto it = index_.find(text);
    if (it != index_.end()) return it->second;
    MOEEDB_ASSIGN_OR_RETURN(auto ids, embedder_->Tokenize(text));
    const int32_t i = static_cast<int32_t>(ids_.size());
    ids_.push_back(std::move(ids));
    index_.emplace(text, i);
    return i;
  }
  int32_t Find(const std::string& raw) const {
    auto it = index_.find(CleanText(raw));
    return it == index_.end() ? -1 : it->second;
  }
  std::vector<std::vector<int32_t>>& ids() { return ids_; }

 private:
  const Embedder* embedder_;
  std::unordered_map<std::string, int32_t> index_;
  std::vector<std::vector<int32_t>> ids_;
};

// TSV with a header: text1/anchor, text2/entailment, [contradiction] columns.
Status ReadPairsFile(const std::string& path, int32_t source, SentenceTable* table, std::vector<ContrastivePair>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::string line;
  if (!std::getline(in, line)) return Status::InvalidArgument(path + " is empty");
  const auto header = SplitList(line, '\t');
  const bool triplets = header.size() >= 3 && header[2] == "contradiction";
  int64_t row = 1;
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, '\t')) f.push_back(cell);
    if (f.size() < 2) return Status::InvalidArgument(path + ":" + std::to_string(row) + ": fewer than two columns");
    ContrastivePair p;
    p.source = source;
    MOEEDB_ASSIGN_OR_RETURN(p.anchor, table->Add(f[0]));
    MOEEDB_ASSIGN_OR_RETURN(p.positive, table->Add(f[1]));
    if (triplets && f.size() >= 3) {
      MOEEDB_ASSIGN_OR_RETURN(p.negative, table->Add(f[2]));
    }
    if (p.anchor < 0 || p.positive < 0 || p.anchor == p.positive) continue;
    out->push_back(p);
  }
  return Status::OK();
}

// CSV sentence1,sentence2,score (STS-B).
Status ReadScoredFile(const std::string& path, SentenceTable* table, std::vector<ScoredPair>* out) {
  MOEEDB_ASSIGN_OR_RETURN(auto rows, ReadCsv(path));
  for (const auto& r : rows) {
    if (r.size() < 3) continue;
    ScoredPair p;
    MOEEDB_ASSIGN_OR_RETURN(p.a, table->Add(r[0]));
    MOEEDB_ASSIGN_OR_RETURN(p.b, table->Add(r[1]));
    try {
      p.score = std::stof(r[2]);
    } catch (const std::exception&) {
      continue;  // a header
    }
    if (p.a >= 0 && p.b >= 0) out->push_back(p);
  }
  return Status::OK();
}

// CSV text,label with a header (Banking77): each text paired with another
// text of its label (drawn with `seed`), grouped by label.
Status ReadLabeledFile(const std::string& path, int32_t source, uint64_t seed, SentenceTable* table,
                       std::vector<ContrastivePair>* out) {
  MOEEDB_ASSIGN_OR_RETURN(auto rows, ReadCsv(path));
  std::map<std::string, std::vector<int32_t>> by_label;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].size() < 2) continue;
    MOEEDB_ASSIGN_OR_RETURN(int32_t s, table->Add(rows[i][0]));
    if (s >= 0) by_label[rows[i][1]].push_back(s);
  }
  std::mt19937_64 rng(seed + 77);
  int32_t group = 0;
  for (auto& [label, members] : by_label) {
    if (members.size() >= 2) {
      std::uniform_int_distribution<size_t> pick(0, members.size() - 2);
      for (size_t i = 0; i < members.size(); ++i) {
        size_t j = pick(rng);
        if (j >= i) ++j;  // any other member
        out->push_back({members[i], members[j], -1, group, source});
      }
    }
    ++group;
  }
  return Status::OK();
}

// texts.txt (one per line) and vectors.f32 (rows of `dim` floats, possibly
// fewer rows than texts while the teacher is still running). With
// add_unknown, texts no training file holds join the table as teacher-only
// sentences; else they are skipped. Fills d->teacher, teacher_row (call
// after the table is complete but before moving its ids out) and teacher_only.
Status ReadTeacher(const std::string& texts_path, const std::string& vectors_path, int64_t dim, bool add_unknown,
                   SentenceTable* table, EmbedTrainData* d) {
  std::ifstream tin(texts_path, std::ios::binary);
  if (!tin) return Status::NotFound("cannot read " + texts_path);
  std::ifstream vin(vectors_path, std::ios::binary);
  if (!vin) return Status::NotFound("cannot read " + vectors_path);
  const int64_t rows = static_cast<int64_t>(fs::file_size(vectors_path)) / (dim * 4);
  d->teacher_dim = dim;
  std::vector<int32_t> row(table->ids().size(), -1);
  std::string line;
  std::vector<float> v(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows && std::getline(tin, line); ++r) {
    vin.read(reinterpret_cast<char*>(v.data()), dim * 4);
    double n = 0;
    for (float x : v) n += static_cast<double>(x) * x;
    if (!(n > 0)) continue;  // a zero (or broken) row teaches nothing
    int32_t s = table->Find(line);
    if (s < 0 && add_unknown) {
      MOEEDB_ASSIGN_OR_RETURN(s, table->Add(line));
      if (s < 0) continue;
      row.resize(table->ids().size(), -1);
      d->teacher_only.push_back(s);
    }
    if (s < 0 || row[s] >= 0) continue;
    row[s] = static_cast<int32_t>(d->teacher.size() / dim);
    for (float x : v) d->teacher.push_back(static_cast<float>(x / std::sqrt(n)));
  }
  d->teacher_row = std::move(row);
  return Status::OK();
}

// embed_loss_curve.png (training loss every 20 steps) and
// embed_validation_curve.png (validation Spearman at every evaluation) from
// embed_training_log.json.
Status PlotEmbedCurves(const std::string& out_dir) {
  MOEEDB_ASSIGN_OR_RETURN(auto log, ReadTrainingLog((fs::path(out_dir) / "embed_training_log.json").string()));
  const auto loss = WithHistory({{}, {}, 40, 90, 200}, log, "loss");
  const auto val = WithHistory({{0.0}, {log.value("initial_val_spearman", 0.0)}, 210, 40, 40}, log, "val_spearman");
  MOEEDB_RETURN_IF_ERROR(WriteLinePlotPng((fs::path(out_dir) / "embed_loss_curve.png").string(), {loss},
                                                {"embedding training loss", "step", "loss"}));
  return WriteLinePlotPng((fs::path(out_dir) / "embed_validation_curve.png").string(), {val},
                                {"validation spearman", "step", "spearman"});
}

}  // namespace

int RunTrainEmbed(const Args& args) {
  const char* cmd = "train embed";
  EmbedTrainOptions o;
  o.model_dir = args.Get("model");
  o.out_dir = args.Get("out");
  if (Status s = ReadSpecFlags(args, EmbedTrainFields(), &o); !s.ok()) return UsageError(cmd, s.message());
  if (Status s = o.Validate(); !s.ok()) return UsageError(cmd, s.message());
  const int64_t tdim = args.Int("teacher-dim");
  o.log = [](const std::string& line) { std::cerr << "train embed: " << line << std::endl; };

  auto model = MoeModel::LoadDir(o.model_dir);
  if (!model.ok()) return Fail(cmd, model.status().message());
  auto tok = LoadTokenizer("", o.model_dir);
  if (!tok.ok()) return Fail(cmd, tok.status().message());
  auto none = FindPrompt("none");
  if (!none.ok()) return Fail(cmd, none.status().message());
  EmbedderOptions eo;
  eo.prompt = *none;
  Embedder embedder(model->get(), tok->get(), eo);

  EmbedTrainData d;
  SentenceTable table(&embedder);
  int32_t source = 0;
  for (const auto& f : SplitList(args.Get("pairs"), ','))
    if (Status s = ReadPairsFile(f, source++, &table, &d.pairs); !s.ok()) return Fail(cmd, s.message());
  if (args.Has("labeled"))
    if (Status s = ReadLabeledFile(args.Get("labeled"), source++, o.seed, &table, &d.pairs); !s.ok())
      return Fail(cmd, s.message());
  if (args.Has("scored"))
    if (Status s = ReadScoredFile(args.Get("scored"), &table, &d.scored); !s.ok()) return Fail(cmd, s.message());
  if (args.Has("validation"))
    if (Status s = ReadScoredFile(args.Get("validation"), &table, &d.validation); !s.ok()) return Fail(cmd, s.message());
  if (args.Has("teacher")) {
    const auto t = SplitList(args.Get("teacher"), ',');
    if (t.size() != 2) return UsageError(cmd, "--teacher takes TEXTS,VECTORS");
    if (Status s = ReadTeacher(t[0], t[1], tdim, o.teacher_per_step > 0, &table, &d); !s.ok()) return Fail(cmd, s.message());
  }
  d.sentences = std::move(table.ids());
  d.teacher_row.resize(d.teacher.empty() ? 0 : d.sentences.size(), -1);
  int64_t with_teacher = 0;
  for (int32_t r : d.teacher_row) with_teacher += r >= 0;
  std::cerr << "train embed: " << d.sentences.size() << " sentences (" << with_teacher << " with teacher vectors, "
            << d.teacher_only.size() << " of them teacher-only), "
            << d.pairs.size() << " contrastive pairs from " << source << " sources, " << d.scored.size()
            << " scored pairs, " << d.validation.size() << " validation pairs; BLAS: " << BlasCore() << std::endl;
  auto r = TrainEmbedding(d, o);
  if (!r.ok()) return Fail(cmd, r.status().message());
  if (!r->finished) {
    std::cerr << "train embed: stopped at step " << r->step << " of " << o.steps
              << "; run the same command again to continue" << std::endl;
    return 3;
  }
  if (Status s = PlotEmbedCurves(o.out_dir); !s.ok()) std::cerr << "train embed: no plots: " << s.message() << std::endl;
  std::cout << "{\"steps\":" << r->step << ",\"initial_val_spearman\":" << r->initial_val_spearman
            << ",\"val_spearman\":" << r->val_spearman << ",\"sentences_per_second\":" << r->sentences_per_second
            << "}" << std::endl;
  return 0;
}

}  // namespace moeedb::cli
