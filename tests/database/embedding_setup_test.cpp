// The embedding setup's standardization statistics: computed from the
// calibration texts, or read from the model folder's standardization.json
// when (and only when) it was written for the same setup.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "database/embedding_setup.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using nlohmann::json;

TEST(EmbeddingSetupStats, ShippedFileIsUsedOnlyForItsOwnSetup) {
  test::TempDir dir;
  auto r = test::Run({test::Binary(), "model", "init", "--config", test::Data("configs/olmoe-tiny.json"), "--tokenizer",
                      test::Data("tokenizers/olmoe/tokenizer.json"), "--seed", "9", "--out", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EmbeddingSpec cfg;
  cfg.model_dir = dir.path();
  auto setup = EmbeddingSetup::Load(cfg);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  auto computed = (*setup)->CalibrationStats();
  ASSERT_TRUE(computed.ok());

  r = test::Run({test::Binary(), "model", "calibrate", "--model", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json file = json::parse(test::ReadFile(dir / "standardization.json"));
  EXPECT_EQ(file["setup"]["routing"], "learned");
  EXPECT_EQ(file["hs"], json::parse(computed->first));
  EXPECT_EQ(file["rw"], json::parse(computed->second));

  // A marked file is what the same setup now reads...
  file["hs"]["mean"][0] = 123.0;
  test::WriteFile(dir / "standardization.json", file.dump());
  auto read = (*setup)->CalibrationStats();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(json::parse(read->first)["mean"][0], 123.0);
  // ...while another routing, or a damaged file, recomputes.
  EmbeddingSpec top1 = cfg;
  top1.routing = "top1";
  auto other = EmbeddingSetup::Load(top1);
  ASSERT_TRUE(other.ok());
  auto recomputed = (*other)->CalibrationStats();
  ASSERT_TRUE(recomputed.ok());
  EXPECT_NE(json::parse(recomputed->first)["mean"][0], 123.0);
  test::WriteFile(dir / "standardization.json", "{not json");
  auto damaged = (*setup)->CalibrationStats();
  ASSERT_TRUE(damaged.ok());
  EXPECT_EQ(json::parse(damaged->first), json::parse(computed->first));
}

}  // namespace
}  // namespace moeedb
