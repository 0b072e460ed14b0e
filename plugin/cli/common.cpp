#include "plugin/cli/common.h"

#include <fstream>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <istream>

namespace moeedb::cli {

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& tokenizer_flag, const std::string& model_dir) {
  if (!tokenizer_flag.empty()) return moeedb::LoadTokenizer(tokenizer_flag);
  if (model_dir.empty()) return Status::InvalidArgument("give --model DIR or --tokenizer FILE");
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  if (!std::filesystem::exists(path))
    return Status::NotFound("model folder " + model_dir + " has no tokenizer.json (or pass --tokenizer FILE)");
  return moeedb::LoadTokenizer(path);
}

std::vector<std::string> ReadLines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

Status ReadPromptFlag(const Args& args, PromptTemplate* prompt) {
  if (!args.Has("prompt")) return Status::OK();
  MOEEDB_ASSIGN_OR_RETURN(*prompt, FindPrompt(args.Get("prompt")));
  return Status::OK();
}

namespace fs = std::filesystem;

std::string DefaultModelDir() {
  if (const char* m = std::getenv("MOEEDB_MODEL"); m != nullptr && *m) return m;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path bin = exe.parent_path();
  for (const fs::path& dir : {bin.parent_path() / "models" / "moeedb-tiny", bin / "models" / "moeedb-tiny",
                              bin.parent_path() / "share" / "moeedb" / "models" / "moeedb-tiny"})
    if (fs::exists(dir / "config.json", ec)) return dir.lexically_normal().string();
  return "";
}

std::string ModelDirFlag(const Args& args) { return args.Has("model") ? args.Get("model") : DefaultModelDir(); }

std::string DefaultCacheDir() {
  if (const char* d = std::getenv("MOEEDB_CACHE_DIR"); d != nullptr && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x) return std::string(x) + "/moeedb";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h) return std::string(h) + "/.cache/moeedb";
  return "";
}

void AppendFloat(std::string* out, float v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, p);
}

Result<EmbeddingSpec> EmbeddingSpecFromFlags(const Args& args) {
  EmbeddingSpec cfg;
  MOEEDB_RETURN_IF_ERROR(ReadEmbeddingFlags(args, &cfg));
  cfg.model_dir = ModelDirFlag(args);
  if (!args.Has("cache-dir")) cfg.cache_dir = DefaultCacheDir();
  return cfg;
}

std::vector<FlagSpec> EmbeddingFlags(const std::vector<std::string>& fields) {
  return SpecFlags(EmbeddingFields(), {.only = fields});
}

Status ReadEmbeddingFlags(const Args& args, EmbeddingSpec* cfg) { return ReadSpecFlags(args, EmbeddingFields(), cfg); }

Status ReadWeightFormatFlags(const Args& args, EmbeddingSpec* cfg) {
  return ReadSpecFlags(args, EmbeddingFields(), cfg, {.only = kWeightFormatFields});
}

TempDir MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base ? base : "/tmp") + "/moeedb-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return nullptr;
  return TempDir(new std::string(tmpl));
}

void RemoveDir::operator()(const std::string* path) const {
  std::error_code ec;
  std::filesystem::remove_all(*path, ec);
  delete path;
}

Result<nlohmann::json> ReadTrainingLog(const std::string& path) {
  std::ifstream in(path);
  auto log = nlohmann::json::parse(in, nullptr, false);
  if (log.is_discarded() || !log.contains("history") || !log["history"].is_array())
    return Status::Corruption(path + " is not a readable training log");
  return log;
}

PlotSeries WithHistory(PlotSeries series, const nlohmann::json& log, const std::string& key) {
  for (const auto& h : log["history"])
    if (h.contains(key) && h[key].is_number()) {
      series.x.push_back(h.value("step", 0.0));
      series.y.push_back(h[key].get<double>());
    }
  return series;
}

Result<std::shared_ptr<const TlsContext>> TlsClientFromFlags(const Args& args) {
  if (!args.Has("tls-ca")) return std::shared_ptr<const TlsContext>();
  return TlsContext::Client({args.Get("tls-ca"), args.Get("tls-cert"), args.Get("tls-key")});
}

}  // namespace moeedb::cli
