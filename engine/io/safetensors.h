// Read-only access to HuggingFace safetensors checkpoints over mmap.
//
// A SafetensorsFile maps one file and validates its header completely before
// anyone sees a tensor: header length inside the file, JSON well-formed, every
// dtype known, every data_offsets range inside the data section and consistent
// with dtype x shape. A Checkpoint is the union of one file or of the shards
// listed by model.safetensors.index.json. Tensor bytes stay in the mapping
// (read-only: never write through TensorView::data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

enum class DType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);
// Parses a safetensors dtype string ("F32", "BF16", ...).
Result<DType> ParseDType(const std::string& name);

// A tensor inside a mapped file. Valid while its file is open.
struct TensorView {
  std::string name;
  std::string file;  // path of the file that holds it, for error messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
};

std::string ShapeToString(const std::vector<int64_t>& shape);

class SafetensorsFile {
 public:
  // Maps and validates `path`. Errors name the file (and tensor, if any).
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // nullptr if absent.
  const TensorView* Find(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model folder: model.safetensors, or the shards named by
// model.safetensors.index.json (every shard opened, every listed tensor
// checked to exist in the shard the index names).
class Checkpoint {
 public:
  static Result<std::unique_ptr<Checkpoint>> OpenDir(const std::string& dir);
  // One or more explicit files (e.g. a test fixture with a non-standard name).
  static Result<std::unique_ptr<Checkpoint>> OpenFiles(const std::vector<std::string>& paths);

  const TensorView* Find(const std::string& name) const;
  // Like Find, but a missing tensor is a NotFound error naming it and the files.
  Result<const TensorView*> Require(const std::string& name) const;
  std::vector<std::string> Names() const;
  std::string Describe() const;  // the file list, for messages

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

// Tells the kernel the mapped bytes of `view` will not be read again soon
// (madvise DONTNEED on the whole pages inside them), so a loader that copied
// or converted a tensor does not keep the file's pages resident too. Reading
// the view later is still correct: the pages fault back in from the file.
void ReleasePages(const TensorView& view);

// One tensor to write: raw little-endian bytes of dtype x shape.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes a safetensors file (header padded to 8 bytes, tensors in name order),
// to a temporary name then renamed, so a reader never sees half a file.
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace moeedb
