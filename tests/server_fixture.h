// The fixture of the server tests: a random-weight model, its embedding
// setup and calibration statistics (once per suite), and per test a fresh
// store, embedding queue and Api, called through Api::Handle (no sockets).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "engine/random_checkpoint.h"
#include "plugin/server/api.h"
#include "plugin/server/embed_queue.h"
#include "plugin/service/embedding_setup.h"
#include "tests/test_util.h"

namespace moeedb::servertest {

using json = nlohmann::json;

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    RandomCheckpointOptions opt;
    opt.seed = 21;
    ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/olmoe-tiny.json"), test::Data("tokenizers/olmoe/tokenizer.json"),
                                      *dir_ / "model", opt).ok());
    EmbeddingConfig cfg;
    cfg.model_dir = *dir_ / "model";
    auto s = EmbeddingSetup::Load(cfg);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    setup_ = std::move(s).value().release();
    auto stats = setup_->CalibrationStats();
    ASSERT_TRUE(stats.ok());
    stats_ = new std::pair<std::string, std::string>(*stats);
  }
  static void TearDownTestSuite() {
    delete stats_;
    delete setup_;
    delete dir_;
  }
  void SetUp() override {
    store_ = std::move(Store::Open(db_ / "db")).value();
    queue_ = std::make_unique<EmbedQueue>(&setup_->embedder(), 64, 4096);
    ApiOptions o;
    o.served_model_name = "tiny";
    o.max_inputs = 8;
    o.max_tokens_per_input = 64;
    api_ = std::make_unique<Api>(o, setup_, queue_.get(), store_.get(), stats_->first, stats_->second);
  }
  HttpResponse Call(const std::string& method, const std::string& target, const std::string& body = "",
                    std::map<std::string, std::string> headers = {}) {
    return api_->Handle(HttpRequest{method, target, headers, body});
  }
  static json Body(const HttpResponse& r) { return json::parse(r.body); }

  static test::TempDir* dir_;
  static EmbeddingSetup* setup_;
  static std::pair<std::string, std::string>* stats_;
  test::TempDir db_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<EmbedQueue> queue_;
  std::unique_ptr<Api> api_;
};

}  // namespace moeedb::servertest
