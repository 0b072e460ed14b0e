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

#include "engine/model/random_checkpoint.h"
#include "plugin/server/api.h"
#include "plugin/server/embed_queues.h"
#include "database/database.h"
#include "database/embedding_setup.h"
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
    EmbeddingSpec cfg;
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
  void SetUp() override { api_ = NewApi(Options()); }
  static ApiOptions Options() {
    ApiOptions o;
    o.served_model_name = "tiny";
    o.max_inputs = 8;
    o.max_tokens_per_input = 64;
    return o;
  }
  // A fresh Api over this test's database (reopened), queues of `workers`
  // single-threaded workers; the suite's setup is shared with the database.
  std::unique_ptr<Api> NewApi(const ApiOptions& o, int workers = 1) {
    api_.reset();
    db.reset();
    queues_ = std::make_unique<EmbedQueues>(EmbedQueueOptions{64, 4096, 2000, workers, workers > 1 ? 1 : 0});
    DatabaseOptions dbo;
    dbo.embed = QueuedEmbedFunction(o, queues_.get());
    db = std::move(Database::Open(db_ / "db", std::move(dbo))).value();
    db->AddSetup(setup_);
    return std::make_unique<Api>(o, db.get(), setup_, queues_.get(), stats_->first, stats_->second);
  }
  Store* store() { return db->store(); }
  HttpResponse Call(const std::string& method, const std::string& target, const std::string& body = "",
                    std::map<std::string, std::string> headers = {}) {
    return api_->Handle(HttpRequest{method, target, headers, body});
  }
  static json Body(const HttpResponse& r) { return json::parse(r.body); }

  static test::TempDir* dir_;
  static EmbeddingSetup* setup_;
  static std::pair<std::string, std::string>* stats_;
  test::TempDir db_;
  std::unique_ptr<EmbedQueues> queues_;
  std::unique_ptr<Database> db;
  std::unique_ptr<Api> api_;
};

}  // namespace moeedb::servertest
