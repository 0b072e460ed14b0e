// Search latency on a node while it builds a replica from PostgreSQL, beside
// the same node's latency idle, in one process:
//
//   replica_build --store URI --index-dir DIR [--docs 1000000] [--small 5000]
//                 [--dim-hs 64] [--dim-rw 8] [--lexical 1] [--idle-searches 3000]
//
// The store gets two collections written through the store (no model:
// random vectors, short texts): `big` (--docs) and `small`. A node (a
// Database over the store, its indexes in DIR) opens `small` and times
// searches of it idle; then, on another thread, it opens `big`, building
// that replica from the store, while the searches of `small` go on. Prints
// one JSON object: latency percentiles idle and during the build, the
// build's seconds, and the ratio of the p99s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench/bench_child.h"
#include "bench/bench_samples.h"
#include "bench/cpu_flags.h"
#include "database/database.h"
#include "database/vector_collection.h"

namespace fs = std::filesystem;
using namespace moeedb::bench;  // Flag, IntFlag, Die, Gaussian, Percentiles
using Clock = std::chrono::steady_clock;

namespace {

const char* kWords[] = {"river", "stone", "engine", "market", "garden", "signal", "harbor", "ledger",
                        "orbit", "violin", "glacier", "pepper", "castle", "thread", "canvas", "meadow"};

// Writes `n` documents into collection `name` (created afresh) through the store.
void Fill(moeedb::Store* store, const std::string& name, int64_t n, size_t dh, size_t dr, bool lexical,
          const std::string& index_dir) {
  (void)moeedb::VectorCollection::Drop(store, name, index_dir);
  moeedb::CollectionOptions o;
  o.dim_hs = dh;
  o.dim_rw = dr;
  o.lexical.enabled = lexical;
  if (auto c = moeedb::VectorCollection::Create(store, name, o, index_dir); !c.ok()) Die(c.status().ToString());
  std::mt19937_64 rng(name.size());
  constexpr int64_t kBatch = 2048;
  for (int64_t at = 0; at < n; at += kBatch) {
    std::vector<moeedb::StoredDocument> docs;
    for (int64_t i = at; i < std::min(n, at + kBatch); ++i) {
      std::string text = "document " + std::to_string(i);
      for (int w = 0; w < 8; ++w) text += std::string(" ") + kWords[rng() % 16];
      docs.push_back({name + "-" + std::to_string(i), text, "{}", Gaussian(rng, dh), Gaussian(rng, dr)});
    }
    if (auto w = store->Upsert(name, docs, /*sync=*/false); !w.ok()) Die(w.status().ToString());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const BenchFlags flags("replica_build", argc, argv);
  const std::string uri = Flag("store"), index_dir = Flag("index-dir");
  if (uri.empty() || index_dir.empty()) Die("--store URI and --index-dir DIR are required");
  const int64_t docs = IntFlag("docs", 1000000), small = IntFlag("small", 5000);
  const size_t dh = IntFlag("dim-hs", 64), dr = IntFlag("dim-rw", 8);
  const bool lexical = IntFlag("lexical", 1) != 0;
  const int64_t idle_searches = IntFlag("idle-searches", 3000);
  std::printf("CPU flags: %s\n", CpuFlags().c_str());
  std::fflush(stdout);

  {
    auto store = moeedb::Store::Open(uri);
    if (!store.ok()) Die(store.status().ToString());
    const std::string writer_dir = index_dir + "/writer";
    const auto t0 = Clock::now();
    Fill(store->get(), "big", docs, dh, dr, lexical, writer_dir);
    Fill(store->get(), "small", small, dh, dr, lexical, writer_dir);
    std::fprintf(stderr, "wrote %lld + %lld documents in %.1f s\n", static_cast<long long>(docs),
                 static_cast<long long>(small), std::chrono::duration<double>(Clock::now() - t0).count());
    fs::remove_all(writer_dir);
  }

  // The node: holds neither collection yet.
  const std::string node_dir = index_dir + "/node";
  fs::remove_all(node_dir);
  moeedb::DatabaseOptions options;
  options.index_dir = node_dir;
  auto db = moeedb::Database::Open(uri, options);
  if (!db.ok()) Die(db.status().ToString());
  if (auto c = (*db)->OpenCollection("small"); !c.ok()) Die(c.status().ToString());

  std::mt19937_64 rng(99);
  auto search = [&]() -> double {
    moeedb::VectorQuery q;
    q.hs = Gaussian(rng, dh);
    q.rw = Gaussian(rng, dr);
    moeedb::SearchSpec spec;
    spec.k = 10;
    const auto t = Clock::now();
    auto hits = (*db)->SearchVectors("small", q, spec);
    if (!hits.ok()) Die(hits.status().ToString());
    if (hits->size() != 10) Die("a search of small found " + std::to_string(hits->size()) + " hits");
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  for (int i = 0; i < 200; ++i) search();  // warm-up
  std::vector<double> idle;
  for (int64_t i = 0; i < idle_searches; ++i) idle.push_back(search());

  std::atomic<bool> built{false};
  double build_s = 0;
  moeedb::Status build_status;
  std::thread builder([&] {
    const auto t = Clock::now();
    auto c = (*db)->OpenCollection("big");
    build_s = std::chrono::duration<double>(Clock::now() - t).count();
    if (!c.ok()) build_status = c.status();
    else if ((*c)->size() != static_cast<size_t>(docs))
      build_status = moeedb::Status::Corruption("built " + std::to_string((*c)->size()) + " documents");
    built = true;
  });
  std::vector<double> during;
  while (!built) during.push_back(search());
  builder.join();
  if (!build_status.ok()) Die(build_status.ToString());

  const nlohmann::json a = Percentiles(idle), b = Percentiles(during);
  const nlohmann::json out = {{"docs", docs},
                              {"small", small},
                              {"dims", {dh, dr}},
                              {"lexical", lexical},
                              {"build_s", build_s},
                              {"idle", a},
                              {"during_build", b},
                              {"p99_during_over_idle", a["p99_ms"].get<double>() > 0
                                                           ? b["p99_ms"].get<double>() / a["p99_ms"].get<double>()
                                                           : 0.0}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
