#include "engine/model/random_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"

namespace moeedb {

namespace fs = std::filesystem;

Status WriteRandomCheckpoint(const std::string& config_path, const std::string& tokenizer_path,
                             const std::string& out_dir, const RandomCheckpointOptions& opt) {
  MOEEDB_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromFile(config_path));
  if (opt.dtype != DType::kF32 && opt.dtype != DType::kBF16 && opt.dtype != DType::kF16)
    return Status::InvalidArgument(std::string("random checkpoints are F32, BF16 or F16, not ") + DTypeName(opt.dtype));
  if (!tokenizer_path.empty() && !fs::is_regular_file(tokenizer_path))
    return Status::NotFound("tokenizer file " + tokenizer_path + " does not exist");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::IOError("cannot create " + out_dir + ": " + ec.message());

  const double stddev = opt.stddev > 0 ? opt.stddev : config.initializer_range;
  CheckpointNaming naming;
  naming.layout = opt.layout;
  const auto specs = ExpectedTensors(config, naming);
  const size_t elem = DTypeSize(opt.dtype);
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}, {"moeedb", "random init, seed " + std::to_string(opt.seed)}};
  uint64_t offset = 0;
  for (const auto& s : specs) {
    uint64_t n = elem;
    for (int64_t d : s.shape) n *= static_cast<uint64_t>(d);
    header[s.name] = {{"dtype", DTypeName(opt.dtype)}, {"shape", s.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');

  const std::string path = (fs::path(out_dir) / "model.safetensors").string();
  const std::string tmp = path + ".tmp";
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IOError("cannot write " + tmp);
    uint64_t hn = h.size();
    out.write(reinterpret_cast<const char*>(&hn), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(opt.seed);
    const at::ScalarType st = opt.dtype == DType::kF32 ? at::kFloat : opt.dtype == DType::kBF16 ? at::kBFloat16 : at::kHalf;
    for (const auto& s : specs) {
      at::Tensor t;
      switch (s.init) {
        case TensorSpec::Init::kOnes: t = at::ones(s.shape, at::kFloat); break;
        case TensorSpec::Init::kZeros: t = at::zeros(s.shape, at::kFloat); break;
        case TensorSpec::Init::kNormal: t = at::normal(0.0, stddev, s.shape, gen); break;
      }
      t = t.to(st).contiguous();
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * elem));
    }
    out.flush();
    if (!out) return Status::IOError("write failed: " + tmp);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("random init failed: ") + e.what());
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status::IOError("cannot rename " + tmp + ": " + ec.message());
  if (fs::exists(fs::path(out_dir) / "model.safetensors.index.json"))
    fs::remove(fs::path(out_dir) / "model.safetensors.index.json");
  fs::copy_file(config_path, fs::path(out_dir) / "config.json", fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::IOError("cannot copy " + config_path + ": " + ec.message());
  if (!tokenizer_path.empty()) {
    fs::copy_file(tokenizer_path, fs::path(out_dir) / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError("cannot copy " + tokenizer_path + ": " + ec.message());
  }
  return Status::OK();
}

}  // namespace moeedb
