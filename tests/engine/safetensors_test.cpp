// Safetensors reading, validation and sharding; checkpoint/config mismatches.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/model/random_checkpoint.h"
#include "engine/io/safetensors.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> Floats(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

// A file whose header is `header` (raw JSON text) followed by `data_bytes` zero bytes.
void WriteRaw(const std::string& path, const std::string& header, size_t data_bytes, int64_t header_len_override = -1) {
  std::string out(8, '\0');
  uint64_t n = header_len_override >= 0 ? static_cast<uint64_t>(header_len_override) : header.size();
  std::memcpy(out.data(), &n, 8);
  out += header + std::string(data_bytes, '\0');
  test::WriteFile(path, out);
}

TEST(Safetensors, RoundTripZeroCopyAndMetadata) {
  test::TempDir dir;
  std::vector<TensorToWrite> ts = {{"b", DType::kF32, {2, 2}, Floats({1, 2, 3, 4})},
                                   {"a", DType::kBF16, {1}, {0x80, 0x3f}}};  // bf16 1.0
  ASSERT_TRUE(WriteSafetensors(dir / "x.safetensors", ts, {{"format", "pt"}}).ok());
  auto f = SafetensorsFile::Open(dir / "x.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const TensorView* b = (*f)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 2}));
  float last;  // the data need not be 4-byte aligned in the file: copy, do not dereference
  std::memcpy(&last, static_cast<const char*>(b->data) + 3 * sizeof(float), sizeof(float));
  EXPECT_EQ(last, 4.0f);
  EXPECT_EQ((*f)->Find("a")->dtype, DType::kBF16);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->Find("zzz"), nullptr);
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
  test::TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "x.safetensors", {{"w", DType::kF32, {4}, Floats({1, 2, 3, 4})}}).ok());
  fs::resize_file(dir / "x.safetensors", fs::file_size(dir / "x.safetensors") - 3);
  auto f = SafetensorsFile::Open(dir / "x.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kCorruption);
  EXPECT_NE(f.status().message().find("x.safetensors"), std::string::npos);
  EXPECT_NE(f.status().message().find("'w'"), std::string::npos);
  fs::resize_file(dir / "x.safetensors", 5);
  EXPECT_FALSE(SafetensorsFile::Open(dir / "x.safetensors").ok());
}

TEST(Safetensors, HeaderOverrunAndBadJson) {
  test::TempDir dir;
  WriteRaw(dir / "a.safetensors", "{}", 0, 1 << 20);
  auto a = SafetensorsFile::Open(dir / "a.safetensors");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("overruns"), std::string::npos);
  WriteRaw(dir / "b.safetensors", "{\"w\": [", 0);
  auto b = SafetensorsFile::Open(dir / "b.safetensors");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("JSON"), std::string::npos);
}

TEST(Safetensors, OffsetsOutOfRangeAndSizeMismatch) {
  test::TempDir dir;
  WriteRaw(dir / "a.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  auto a = SafetensorsFile::Open(dir / "a.safetensors");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("out of range"), std::string::npos) << a.status().message();
  WriteRaw(dir / "b.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16);
  auto b = SafetensorsFile::Open(dir / "b.safetensors");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("expected 16"), std::string::npos) << b.status().message();
  WriteRaw(dir / "c.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[12,4]}})", 16);
  EXPECT_FALSE(SafetensorsFile::Open(dir / "c.safetensors").ok());
}

TEST(Safetensors, UnknownDtype) {
  test::TempDir dir;
  WriteRaw(dir / "a.safetensors", R"({"w":{"dtype":"Q4_K","shape":[4],"data_offsets":[0,4]}})", 4);
  auto a = SafetensorsFile::Open(dir / "a.safetensors");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("unknown dtype 'Q4_K'"), std::string::npos);
  EXPECT_NE(a.status().message().find("'w'"), std::string::npos);
}

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomCheckpointOptions opt;
    opt.seed = 1;
    ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/deepseek-tiny.json"), "", dir_.path(), opt).ok());
  }
  test::TempDir dir_;
};

TEST_F(CheckpointErrors, MissingTensorIsNamed) {
  auto f = SafetensorsFile::Open(dir_ / "model.safetensors");
  ASSERT_TRUE(f.ok());
  std::vector<TensorToWrite> keep;
  for (const auto& [name, v] : (*f)->tensors()) {
    if (name == "model.layers.1.mlp.experts.3.up_proj.weight") continue;
    const auto* p = static_cast<const uint8_t*>(v.data);
    keep.push_back({name, v.dtype, v.shape, std::vector<uint8_t>(p, p + v.nbytes)});
  }
  f->reset();
  ASSERT_TRUE(WriteSafetensors(dir_ / "model.safetensors", keep).ok());
  auto m = MoeModel::LoadDir(dir_.path());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kNotFound);
  EXPECT_NE(m.status().message().find("model.layers.1.mlp.experts.3.up_proj.weight"), std::string::npos);
}

TEST_F(CheckpointErrors, ShapeThatDisagreesWithConfig) {
  // Same weights, config with a different expert width.
  auto cfg = nlohmann::json::parse(test::ReadFile(dir_ / "config.json"));
  cfg["moe_intermediate_size"] = 24;
  test::WriteFile(dir_ / "config.json", cfg.dump());
  auto m = MoeModel::LoadDir(dir_.path());
  ASSERT_FALSE(m.ok());
  const std::string& msg = m.status().message();
  EXPECT_NE(msg.find("has shape [16, 32]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("implies [24, 32]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
}

TEST_F(CheckpointErrors, ShardedCheckpointLoadsLikeOneFile) {
  auto single = MoeModel::LoadDir(dir_.path());
  ASSERT_TRUE(single.ok());
  auto ref = (*single)->Forward({{1, 2, 3}});
  ASSERT_TRUE(ref.ok());
  // Split the tensors over two shards and write the index.
  test::TempDir sharded;
  auto f = SafetensorsFile::Open(dir_ / "model.safetensors");
  ASSERT_TRUE(f.ok());
  std::vector<TensorToWrite> parts[2];
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (const auto& [name, v] : (*f)->tensors()) {
    const auto* p = static_cast<const uint8_t*>(v.data);
    const int shard = (i++ % 2);
    parts[shard].push_back({name, v.dtype, v.shape, std::vector<uint8_t>(p, p + v.nbytes)});
    index["weight_map"][name] = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
  }
  ASSERT_TRUE(WriteSafetensors(sharded / "model-00001-of-00002.safetensors", parts[0]).ok());
  ASSERT_TRUE(WriteSafetensors(sharded / "model-00002-of-00002.safetensors", parts[1]).ok());
  test::WriteFile(sharded / "model.safetensors.index.json", index.dump());
  fs::copy_file(dir_ / "config.json", sharded / "config.json");
  auto m = MoeModel::LoadDir(sharded.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto out = (*m)->Forward({{1, 2, 3}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((out->hs - ref->hs).abs().max().item<float>(), 0.0f);
  // An index naming a tensor its shard lacks is corruption.
  index["weight_map"]["model.extra.weight"] = "model-00001-of-00002.safetensors";
  test::WriteFile(sharded / "model.safetensors.index.json", index.dump());
  auto bad = MoeModel::LoadDir(sharded.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.extra.weight"), std::string::npos);
}

TEST_F(CheckpointErrors, Bf16CheckpointLoadsAndMatchesF32) {
  test::TempDir bf;
  RandomCheckpointOptions opt;
  opt.seed = 1;
  opt.dtype = DType::kBF16;
  ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/deepseek-tiny.json"), "", bf.path(), opt).ok());
  auto a = MoeModel::LoadDir(dir_.path());
  auto b = MoeModel::LoadDir(bf.path());
  ASSERT_TRUE(a.ok() && b.ok());
  auto x = (*a)->Forward({{1, 2, 3}});
  auto y = (*b)->Forward({{1, 2, 3}});
  ASSERT_TRUE(x.ok() && y.ok());
  // Same seed, weights rounded to bf16: close but not identical.
  const float diff = (x->hs - y->hs).abs().max().item<float>();
  EXPECT_GT(diff, 0.0f);
  EXPECT_LT(diff, 0.1f);
}

}  // namespace
}  // namespace moeedb
