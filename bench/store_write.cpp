// Store-only write throughput (no model): documents with precomputed vectors
// of the embedded default model's sizes upserted in acknowledged (synced)
// batches into one store by concurrent writers (threads sharing one Store, as
// a node's requests do), and the bytes each document takes there.
//
//   store_write --store LOCATION [--docs 20000] [--batch 256] [--writers 1]
//               [--collections 1] [--dim-hs 1024] [--dim-rw 32] [--text-bytes 300]
//               [--into NAME --first N]
// LOCATION: a folder (RocksStore) or a postgresql:// URI (PostgresStore).
// Writer w writes batches w, w + writers, ... to collection w % collections
// (created afresh), or with --into to the existing collection NAME (e.g. one
// a server created, to fill it without a model), documents doc-N from
// --first on. Documents are made and written 131,072 at a time (the time
// counts the writes only), so millions fit in memory.
// Prints one JSON object: docs/s, seconds, bytes per document, batch p50/p99 ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

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

// The tables' and their indexes' bytes (TOAST included); `uri` without
// moeedb's own write_connections= (libpq does not know it).
uint64_t PostgresBytes(const std::string& uri) {
  pqxx::connection c(std::regex_replace(uri, std::regex("[?&]write_connections=[0-9]+"), ""));
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
  const int64_t writers = IntFlag("writers", 1), collections = IntFlag("collections", 1);
  if (docs < 1 || batch < 1 || writers < 1 || collections < 1 || writers > 256 || collections > 256)
    Die("--docs, --batch, --writers (at most 256) and --collections (at most 256) must be positive");
  const int64_t dh = IntFlag("dim-hs", 1024), dr = IntFlag("dim-rw", 32), text_bytes = IntFlag("text-bytes", 300);
  const bool postgres = moeedb::IsPostgresLocation(location);
  auto store = moeedb::Store::Open(location);
  if (!store.ok()) Die(store.status().ToString());
  const std::string into = Flag("into");
  const int64_t first = IntFlag("first", 0);
  const auto name = [&](int64_t c) { return into.empty() ? "bench" + std::to_string(c) : into; };
  if (into.empty()) {
    for (int64_t c = 0; c < collections; ++c) {
      (void)(*store)->DropCollection(name(c));
      if (auto r = (*store)->CreateCollection(name(c), "{}"); !r.ok()) Die(r.status().ToString());
    }
  } else if (auto r = (*store)->GetCollection(into); !r.ok()) {
    Die(r.status().ToString());
  }

  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  std::vector<std::vector<double>> batch_ms(writers);
  std::vector<std::string> errors(writers);
  double s = 0;
  constexpr int64_t kChunk = 131072;
  for (int64_t from = 0; from < docs; from += kChunk) {
    const int64_t n = std::min(kChunk, docs - from);
    std::vector<moeedb::StoredDocument> all(n);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = first + from + j;
      auto& d = all[j];
      d.id = "doc-" + std::to_string(i);
      d.text.assign(text_bytes, 'a' + i % 26);
      d.metadata_json = "{\"n\": " + std::to_string(i % 100) + "}";
      d.hs.resize(dh);
      d.rw.resize(dr);
      for (auto& x : d.hs) x = g(rng);
      for (auto& x : d.rw) x = g(rng);
    }
    const int64_t batches = (n + batch - 1) / batch;
    std::vector<std::vector<moeedb::StoredDocument>> batched(batches);
    for (int64_t i = 0; i < batches; ++i)
      batched[i].assign(all.begin() + i * batch, all.begin() + std::min(n, (i + 1) * batch));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int64_t w = 0; w < writers; ++w)
      threads.emplace_back([&, w] {
        for (int64_t i = w; i < batches && errors[w].empty(); i += writers) {
          const auto b0 = std::chrono::steady_clock::now();
          if (auto r = (*store)->Upsert(name(w % collections), batched[i], /*sync=*/true); !r.ok())
            errors[w] = r.status().ToString();
          batch_ms[w].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count());
        }
      });
    for (auto& t : threads) t.join();
    s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& e : errors)
      if (!e.empty()) Die(e);
  }
  for (const auto& e : errors)
    if (!e.empty()) Die(e);
  std::vector<double> ms;
  for (const auto& v : batch_ms) ms.insert(ms.end(), v.begin(), v.end());
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return ms[static_cast<size_t>(q * (ms.size() - 1) + 0.5)]; };
  const uint64_t bytes = postgres ? PostgresBytes(location) : FolderBytes(location);
  const nlohmann::json out = {{"store", postgres ? "postgresql" : "rocksdb"},
                              {"docs", docs},
                              {"batch", batch},
                              {"writers", writers},
                              {"collections", collections},
                              {"batch_ms_p50", at(0.5)},
                              {"batch_ms_p99", at(0.99)},
                              {"seconds", s},
                              {"docs_per_s", docs / s},
                              {"bytes_per_doc", static_cast<double>(bytes) / docs},
                              {"vector_bytes_per_doc", (dh + dr) * 4}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
