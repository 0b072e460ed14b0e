// Search latency on a node while it builds a replica from PostgreSQL, beside
// the same node's latency idle, in one process:
//
//   replica_build --store URI --index-dir DIR [--docs 1000000] [--small 5000]
//                 [--dim-hs 64] [--dim-rw 8] [--lexical 1] [--idle-searches 3000]
//   replica_build --store URI --index-dir DIR --shard-of S [--rounds 3] [--docs ...]
//
// The store gets two collections written through the store (no model:
// random vectors, short texts): `big` (--docs) and `small`. A node (a
// Database over the store, its indexes in DIR) opens `small` and times
// searches of it idle; then, on another thread, it opens `big`, building
// that replica from the store, while the searches of `small` go on. Prints
// one JSON object: latency percentiles idle and during the build, the
// build's seconds, and the ratio of the p99s.
//
// With --shard-of S: the time to build one shard of S of `big` from the
// store (dense index and lexical), as the collection is placed (the range
// layout: the shard's rows read through the shard-key index) beside the
// modulo layout of older collections (every row of the collection walked),
// alternating which goes first, --rounds times after an untimed round; one
// JSON object with each run's seconds, the medians and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench/bench_child.h"
#include "bench/bench_samples.h"
#include "bench/cpu_flags.h"
#include "database/database.h"
#include "database/shard_replica.h"
#include "database/vector_collection.h"

namespace fs = std::filesystem;
using namespace moeedb::bench;  // Flag, IntFlag, Die, Gaussian, Median, Percentiles
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

// --shard-of: shard `shard` of `shards` of `big` built from the store in
// each layout, `rounds` times, alternating the order.
int CompareShardBuilds(moeedb::Store* store, const std::string& index_dir, uint32_t shards, int rounds) {
  const uint32_t shard = 0;
  auto rec = store->GetCollection("big");
  if (!rec.ok()) Die(rec.status().ToString());
  auto placed = moeedb::CollectionLayout::FromRecord(*rec);
  if (!placed.ok()) Die(placed.status().ToString());
  placed->shards = shards;  // as a split of S would place it
  std::map<std::string, std::vector<double>> seconds;
  std::map<std::string, size_t> shard_docs;  // the two layouts place different documents in shard 0
  // Round -1, untimed: the first reads of rows just written set their hint
  // bits (every page written again), which a store that has been up a while
  // (autovacuum) no longer pays; whichever layout went first paid it (5x).
  for (int round = -1; round < rounds; ++round) {
    for (int i = 0; i < 2; ++i) {
      const bool range = (i == 0) == (round % 2 == 0);
      moeedb::CollectionLayout layout = *placed;
      layout.shard_layout = range ? moeedb::ShardLayout::kRange : moeedb::ShardLayout::kModulo;
      const std::string dir = index_dir + "/shard-build";
      moeedb::ShardReplica::RemoveFolders(dir);
      const auto t = Clock::now();
      auto r = moeedb::ShardReplica::Open(store, layout, shard, dir);
      const double s = std::chrono::duration<double>(Clock::now() - t).count();
      if (!r.ok()) Die(r.status().ToString());
      shard_docs[range ? "range" : "modulo"] = (*r)->size();
      if (round >= 0) seconds[range ? "range" : "modulo"].push_back(s);
      std::fprintf(stderr, "round %d %s: %zu documents in %.2f s\n", round, range ? "range" : "modulo", (*r)->size(), s);
      r->reset();
      moeedb::ShardReplica::RemoveFolders(dir);
    }
  }
  const double range = Median(seconds["range"]), modulo = Median(seconds["modulo"]);
  const nlohmann::json out = {{"shard", shard},       {"of", shards},
                              {"shard_docs", shard_docs}, {"range_s", seconds["range"]},
                              {"modulo_s", seconds["modulo"]}, {"range_median_s", range},
                              {"modulo_median_s", modulo}, {"modulo_over_range", range > 0 ? modulo / range : 0.0}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
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
  const int64_t shard_of = IntFlag("shard-of", 0), rounds = IntFlag("rounds", 3);
  if (shard_of < 0 || shard_of == 1 || shard_of > 65535) Die("--shard-of is 2 to 65535");
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
    if (shard_of > 0) return CompareShardBuilds(store->get(), index_dir, static_cast<uint32_t>(shard_of), rounds);
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
