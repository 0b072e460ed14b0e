// The child of the crash test: ingests batches of crash::kBatch documents
// with synced (acknowledged) writes and prints "ack FIRST LAST" after each
// one returns, snapshotting the index every third batch, until killed.
// Usage: crash_writer DB COLLECTION FIRST_ID BATCHES
#include <cstdio>
#include <cstdlib>
#include <string>

#include "database/vector_collection.h"
#include "tests/database/crash_writer.h"

using namespace moeedb;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: crash_writer DB COLLECTION FIRST_ID BATCHES\n");
    return 2;
  }
  auto store = Store::Open(argv[1]);
  if (!store.ok()) { std::fprintf(stderr, "%s\n", store.status().ToString().c_str()); return 1; }
  const std::string name = argv[2];
  auto coll = VectorCollection::Open(store->get(), name);
  if (!coll.ok() && coll.status().code() == Status::Code::kNotFound) {
    CollectionOptions o;
    o.dim_hs = crash::kDimHs;
    o.dim_rw = crash::kDimRw;
    o.index.hs.kind = IndexKind::kFlat;
    o.index.rw.kind = IndexKind::kHnsw;
    coll = VectorCollection::Create(store->get(), name, o);
  }
  if (!coll.ok()) { std::fprintf(stderr, "%s\n", coll.status().ToString().c_str()); return 1; }
  const uint64_t first = std::strtoull(argv[3], nullptr, 10);
  const int batches = std::atoi(argv[4]);
  for (int b = 0; b < batches; ++b) {
    const uint64_t lo = first + static_cast<uint64_t>(b) * crash::kBatch, hi = lo + crash::kBatch - 1;
    std::vector<StoredDocument> docs;
    for (uint64_t k = lo; k <= hi; ++k)
      docs.push_back({crash::IdOf(k), "doc " + std::to_string(k), "{\"batch\": " + std::to_string(lo) + "}",
                      crash::VecOf(k, crash::kDimHs, 1), crash::VecOf(k, crash::kDimRw, 2)});
    auto r = (*coll)->Upsert(docs, /*sync=*/true);
    if (!r.ok()) { std::fprintf(stderr, "%s\n", r.status().ToString().c_str()); return 1; }
    std::printf("ack %llu %llu\n", static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi));
    std::fflush(stdout);
    if (b % 3 == 2) {
      Status s = (*coll)->SaveIndex();
      if (!s.ok()) { std::fprintf(stderr, "%s\n", s.ToString().c_str()); return 1; }
    }
  }
  return 0;
}
