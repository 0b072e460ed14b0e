// libFuzzer: the HTTP API (the socket-free Api behind `moeedb serve`) over
// arbitrary requests. The input's first line is "METHOD TARGET" (the target
// may hold any bytes: paths, percent-escapes, query strings); the remaining
// lines up to an empty one are "name: value" headers, the rest is the body.
// Served by a random-weight test model over a store in a temporary folder,
// with small limits so embedding requests stay fast. Every answer must be a
// status in 200..599 and, when it says JSON, parse as JSON; the Api must never
// throw.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/random_checkpoint.h"
#include "plugin/server/api.h"
#include "plugin/server/embed_queues.h"
#include "database/database.h"
#include "database/embedding_setup.h"

#ifndef MOEEDB_TEST_DATA_DIR
#error "MOEEDB_TEST_DATA_DIR must name tests/data"
#endif

namespace {

struct Served {
  std::unique_ptr<moeedb::EmbeddingSetup> setup;
  std::unique_ptr<moeedb::EmbedQueues> queues;
  std::unique_ptr<moeedb::Database> db;
  std::unique_ptr<moeedb::Api> api;
};

Served* Serve() {
  static Served* served = [] {
    namespace fs = std::filesystem;
    static char tmpl[] = "/tmp/moeedb-fuzz-api-XXXXXX";
    if (!mkdtemp(tmpl)) __builtin_trap();
    const fs::path dir(tmpl);
    // libFuzzer ends with exit(): the folder goes with the process.
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(tmpl, ec);
    });
    moeedb::RandomCheckpointOptions opt;
    opt.seed = 3;
    if (!moeedb::WriteRandomCheckpoint(MOEEDB_TEST_DATA_DIR "/configs/olmoe-tiny.json",
                                       MOEEDB_TEST_DATA_DIR "/tokenizers/olmoe/tokenizer.json", dir / "model", opt)
             .ok())
      __builtin_trap();
    auto* s = new Served;
    moeedb::EmbeddingSpec cfg;
    cfg.model_dir = dir / "model";
    cfg.threads = 1;
    auto setup = moeedb::EmbeddingSetup::Load(cfg);
    if (!setup.ok()) __builtin_trap();
    s->setup = std::move(setup).value();
    auto stats = s->setup->CalibrationStats();
    if (!stats.ok()) __builtin_trap();
    moeedb::ApiOptions o;
    o.served_model_name = "tiny";
    o.max_inputs = 4;
    o.max_tokens_per_input = 32;
    o.max_documents = 8;
    s->queues = std::make_unique<moeedb::EmbedQueues>(moeedb::EmbedQueueOptions{64, 1024});
    moeedb::DatabaseOptions dbo;
    dbo.embed = moeedb::QueuedEmbedFunction(o, s->queues.get());
    auto db = moeedb::Database::Open(dir / "db", std::move(dbo));
    if (!db.ok()) __builtin_trap();
    s->db = std::move(db).value();
    s->db->AddSetup(s->setup.get());
    s->api = std::make_unique<moeedb::Api>(o, s->db.get(), s->setup.get(), s->queues.get(), stats->first,
                                           stats->second);
    // Something to find: a collection with two documents.
    s->api->Handle({"PUT", "/collections/c", {}, "{}"});
    s->api->Handle({"POST", "/collections/c/documents", {},
                    R"({"documents": [{"id": "1", "text": "a red fox", "metadata": {"n": 1}},
                                      {"id": "2", "text": "blue water", "metadata": {"n": 2}}]})"});
    return s;
  }();
  return served;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Served* s = Serve();
  const std::string in(reinterpret_cast<const char*>(data), size);
  moeedb::HttpRequest r;
  size_t at = in.find('\n');
  const std::string first = in.substr(0, at);
  const size_t space = first.find(' ');
  r.method = first.substr(0, space);
  r.target = space == std::string::npos ? "/" : first.substr(space + 1);
  while (at != std::string::npos) {
    const size_t next = in.find('\n', at + 1);
    const std::string line = in.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    at = next;
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    r.headers[line.substr(0, colon)] = line.substr(std::min(line.size(), colon + 2));
  }
  if (at != std::string::npos) r.body = in.substr(at + 1);
  const moeedb::HttpResponse res = s->api->Handle(r);
  if (res.status < 200 || res.status > 599) __builtin_trap();
  if (res.content_type.find("json") != std::string::npos &&
      nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false).is_discarded())
    __builtin_trap();
  // Bound the state a long run accumulates: at most 8 collections stay.
  if (r.method == "PUT" && res.status < 300) {
    auto all = s->db->ListCollections();
    if (!all.ok()) __builtin_trap();
    for (size_t i = 8; i < all->size(); ++i) s->api->Handle({"DELETE", "/collections/" + (*all)[i].name, {}, ""});
  }
  return 0;
}
