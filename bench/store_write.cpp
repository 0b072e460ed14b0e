// Store-only write throughput (no model): documents with precomputed vectors
// of the embedded default model's sizes upserted in acknowledged (synced)
// batches into one store, and the bytes each document takes there.
//
//   store_write --store LOCATION [--docs 20000] [--batch 256] [--dim-hs 1024]
//               [--dim-rw 32] [--text-bytes 300]
// LOCATION: a folder (RocksStore) or a postgresql:// URI (PostgresStore).
// Prints one JSON object: docs/s, seconds, bytes per document.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <random>

#include "bench/bench_child.h"
#include "storage/store.h"

namespace fs = std::filesystem;
using namespace moeedb::bench;  // Flag, IntFlag, Die

namespace {

uint64_t FolderBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

// The tables' and their indexes' bytes (TOAST included).
uint64_t PostgresBytes(const std::string& uri) {
  pqxx::connection c(uri);
  pqxx::read_transaction t(c);
  return t.exec("SELECT sum(pg_total_relation_size(c)) FROM unnest(ARRAY['moeedb_documents', 'moeedb_ops', "
                "'moeedb_collections']::regclass[]) AS c")[0][0]
      .as<uint64_t>();
}

}  // namespace

int main(int argc, char** argv) {
  const BenchFlags flags("store_write", argc, argv);
  const std::string location = Flag("store");
  if (location.empty()) Die("--store LOCATION is required");
  const int64_t docs = IntFlag("docs", 20000), batch = IntFlag("batch", 256);
  const int64_t dh = IntFlag("dim-hs", 1024), dr = IntFlag("dim-rw", 32), text_bytes = IntFlag("text-bytes", 300);
  const bool postgres = moeedb::IsPostgresLocation(location);
  auto store = moeedb::Store::Open(location);
  if (!store.ok()) Die(store.status().ToString());
  (void)(*store)->DropCollection("bench");
  if (auto c = (*store)->CreateCollection("bench", "{}"); !c.ok()) Die(c.status().ToString());

  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  std::vector<moeedb::StoredDocument> all(docs);
  for (int64_t i = 0; i < docs; ++i) {
    auto& d = all[i];
    d.id = "doc-" + std::to_string(i);
    d.text.assign(text_bytes, 'a' + i % 26);
    d.metadata_json = "{\"n\": " + std::to_string(i % 100) + "}";
    d.hs.resize(dh);
    d.rw.resize(dr);
    for (auto& x : d.hs) x = g(rng);
    for (auto& x : d.rw) x = g(rng);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < docs; i += batch) {
    std::vector<moeedb::StoredDocument> b(all.begin() + i, all.begin() + std::min(docs, i + batch));
    if (auto w = (*store)->Upsert("bench", b, /*sync=*/true); !w.ok()) Die(w.status().ToString());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t bytes = postgres ? PostgresBytes(location) : FolderBytes(location);
  const nlohmann::json out = {{"store", postgres ? "postgresql" : "rocksdb"},
                              {"docs", docs},
                              {"batch", batch},
                              {"seconds", s},
                              {"docs_per_s", docs / s},
                              {"bytes_per_doc", static_cast<double>(bytes) / docs},
                              {"vector_bytes_per_doc", (dh + dr) * 4}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
