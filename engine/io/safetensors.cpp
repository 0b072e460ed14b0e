#include "engine/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI16: return "I16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
  }
  return "?";
}

size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: case DType::kI16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: return 1;
  }
  return 0;
}

Result<DType> ParseDType(const std::string& s) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16}, {"F64", DType::kF64},
      {"I64", DType::kI64}, {"I32", DType::kI32}, {"I16", DType::kI16},   {"I8", DType::kI8},
      {"U8", DType::kU8},   {"BOOL", DType::kBool}};
  for (const auto& [name, d] : kNames)
    if (s == name) return d;
  return Status::NotSupported("unknown dtype '" + s + "' (known: F32 F16 BF16 F64 I64 I32 I16 I8 U8 BOOL)");
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(map_, map_size_);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const std::string where = "safetensors file " + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(where + ": no such file");
    return Status::IOError(where + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::IOError(where + ": " + std::strerror(e));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Status::Corruption(where + ": truncated (" + std::to_string(size) + " bytes, less than the 8-byte header length)");
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Status::IOError(where + ": mmap failed: " + std::strerror(errno));

  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = map;
  f->map_size_ = size;
  const auto* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian hosts only (x86-64, aarch64)
  if (header_len > size - 8) {
    return Status::Corruption(where + ": header length " + std::to_string(header_len) +
                              " overruns the file (" + std::to_string(size) + " bytes): truncated or not safetensors");
  }
  const size_t data_start = 8 + header_len;
  const size_t data_size = size - data_start;
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(bytes + 8), reinterpret_cast<const char*>(bytes + data_start));
  } catch (const std::exception& e) {
    return Status::Corruption(where + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return Status::Corruption(where + ": header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_object())
        for (auto m = v.begin(); m != v.end(); ++m)
          if (m.value().is_string()) f->metadata_[m.key()] = m.value().get<std::string>();
      continue;
    }
    const std::string tw = where + ", tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      return Status::Corruption(tw + ": entry needs dtype (string), shape (array), data_offsets ([begin, end])");
    auto dt = ParseDType(v["dtype"].get<std::string>());
    if (!dt.ok()) return Status::NotSupported(tw + ": " + dt.status().message());
    TensorView t;
    t.name = name;
    t.file = path;
    t.dtype = *dt;
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return Status::Corruption(tw + ": shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / dim)
        return Status::Corruption(tw + ": shape too large");
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const json& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() && !(off[0].is_number_integer() && off[0].get<int64_t>() >= 0))
      return Status::Corruption(tw + ": data_offsets must be non-negative integers");
    if (!off[1].is_number_unsigned() && !(off[1].is_number_integer() && off[1].get<int64_t>() >= 0))
      return Status::Corruption(tw + ": data_offsets must be non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      return Status::Corruption(tw + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "] out of range (data section is " + std::to_string(data_size) +
                                " bytes): truncated file?");
    const uint64_t expected = numel * DTypeSize(t.dtype);
    if (end - begin != expected)
      return Status::Corruption(tw + ": " + std::to_string(end - begin) + " bytes for " + DTypeName(t.dtype) + " " +
                                ShapeToString(t.shape) + " (expected " + std::to_string(expected) + ")");
    t.nbytes = end - begin;
    t.data = bytes + data_start + begin;
    f->tensors_.emplace(name, std::move(t));
  }
  return f;
}

const TensorView* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::OpenFiles(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::InvalidArgument("no safetensors files given");
  auto cp = std::make_unique<Checkpoint>();
  for (const auto& p : paths) {
    auto f = SafetensorsFile::Open(p);
    if (!f.ok()) return f.status();
    for (const auto& [name, view] : (*f)->tensors()) {
      if (cp->index_.count(name))
        return Status::Corruption("tensor '" + name + "' appears in both " + cp->index_[name]->file + " and " + p);
      cp->index_[name] = &view;
    }
    cp->files_.push_back(std::move(f).value());
  }
  return cp;
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::OpenDir(const std::string& dir) {
  const fs::path d(dir);
  const fs::path index_path = d / "model.safetensors.index.json";
  const fs::path single = d / "model.safetensors";
  if (fs::exists(index_path)) {
    json idx;
    try {
      std::ifstream in(index_path);
      idx = json::parse(in);
    } catch (const std::exception& e) {
      return Status::Corruption(index_path.string() + ": not valid JSON: " + e.what());
    }
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
      return Status::Corruption(index_path.string() + ": no weight_map object");
    std::vector<std::string> shards;
    std::map<std::string, std::string> where;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it.value().is_string()) return Status::Corruption(index_path.string() + ": weight_map values must be file names");
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos)
        return Status::Corruption(index_path.string() + ": shard name '" + shard + "' must be a plain file name");
      where[it.key()] = shard;
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    }
    std::vector<std::string> paths;
    for (const auto& s : shards) paths.push_back((d / s).string());
    auto cp = OpenFiles(paths);
    if (!cp.ok()) return cp.status();
    for (const auto& [name, shard] : where) {
      const TensorView* t = (*cp)->Find(name);
      if (t == nullptr || fs::path(t->file).filename() != shard)
        return Status::Corruption(index_path.string() + ": tensor '" + name + "' is listed in shard " + shard +
                                  " but is not there");
    }
    return cp;
  }
  if (fs::exists(single)) return OpenFiles({single.string()});
  return Status::NotFound("no model.safetensors or model.safetensors.index.json in " + dir);
}

const TensorView* Checkpoint::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

Result<const TensorView*> Checkpoint::Require(const std::string& name) const {
  const TensorView* t = Find(name);
  if (t == nullptr) return Status::NotFound("tensor '" + name + "' is missing from " + Describe());
  return t;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> out;
  for (const auto& [n, v] : index_) out.push_back(n);
  return out;
}

std::string Checkpoint::Describe() const {
  if (files_.size() == 1) return files_[0]->path();
  std::string s = std::to_string(files_.size()) + " shards (";
  for (size_t i = 0; i < files_.size(); ++i) s += (i ? ", " : "") + files_[i]->path();
  return s + ")";
}

void ReleasePages(const TensorView& view) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(view.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(view.data) + view.nbytes) / page * page;
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorToWrite*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto* t : order) {
    uint64_t expected = DTypeSize(t->dtype);
    for (int64_t d : t->shape) expected *= static_cast<uint64_t>(d);
    if (expected != t->bytes.size())
      return Status::InvalidArgument("tensor '" + t->name + "': " + std::to_string(t->bytes.size()) +
                                     " bytes for " + DTypeName(t->dtype) + " " + ShapeToString(t->shape));
    header[t->name] = {{"dtype", DTypeName(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IOError("cannot write " + tmp);
    uint64_t n = h.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const auto* t : order) out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
    out.flush();
    if (!out) return Status::IOError("write failed: " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IOError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::OK();
}

}  // namespace moeedb
