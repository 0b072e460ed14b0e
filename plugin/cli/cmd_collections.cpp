// Collection commands: ingest, search, get, delete, collections, checkpoint.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"
#include "plugin/cli/spec_flags.h"
#include "database/document_line.h"
#include "database/spec/collection_spec.h"
#include "database/database.h"
#include "database/embedding_setup.h"
#include "database/payload_facet.h"
#include "database/payload_order.h"
#include "database/search_hit_json.h"
#include "database/vector_collection.h"

namespace moeedb::cli {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The database named by --db, its setups computing as the flags say (dtype,
// quant, device, threads, workers), with --model replacing every
// collection's recorded model folder when given (it must hold the same weights).
Result<std::unique_ptr<Database>> OpenDb(const Args& args, bool must_exist) {
  const std::string db = args.Get("db");
  if (db.empty()) return Status::InvalidArgument("--db DIR is required");
  DatabaseOptions o;
  MOEEDB_RETURN_IF_ERROR(ReadSpecFlags(args, EmbeddingFields(), &o.compute, {.only = {"dtype", "quant", "device", "threads", "workers"}}));
  o.compute.cache_dir = DefaultCacheDir();
  o.model_override = args.Get("model");
  o.must_exist = must_exist;
  o.index_dir = args.Get("index-dir");
  return Database::Open(db, std::move(o));
}

struct Line {
  size_t number;
  StoredDocument doc;
};

class Progress {
 public:
  explicit Progress(size_t total) : total_(total), start_(std::chrono::steady_clock::now()), tty_(isatty(2)) {}
  void Update(size_t done, bool final = false) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = s > 0 ? done / s : 0;
    if (!tty_ && !final && done < next_report_) return;
    if (!tty_ && final && done == last_reported_) return;
    last_reported_ = done;
    next_report_ = done + std::max<size_t>(1, total_ / 10);
    const int width = 30;
    const int filled = total_ ? static_cast<int>(width * done / total_) : width;
    char buf[160];
    std::snprintf(buf, sizeof(buf), "[%s%s] %zu/%zu docs, %.1f docs/s, %.1f s", std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), done, total_, rate, s);
    std::cerr << (tty_ ? "\r" : "") << buf << (tty_ && !final ? "" : "\n") << std::flush;
  }

 private:
  size_t total_;
  std::chrono::steady_clock::time_point start_;
  bool tty_;
  size_t next_report_ = 0;
  size_t last_reported_ = static_cast<size_t>(-1);
};

}  // namespace

int RunIngest(const Args& args) {
  if (args.positional().size() != 1) return UsageError("ingest", "give exactly one FILE.jsonl");
  const long long batch = args.Int("batch");
  // The compute flags are read again where the database opens; checked here
  // so a bad value is a usage error before the file is read.
  EmbeddingSpec compute;
  if (Status s = ReadSpecFlags(args, EmbeddingFields(), &compute); !s.ok()) return UsageError("ingest", s.message());
  CollectionSpec spec;
  if (Status s = ReadSpecFlags(args, CollectionFields(), &spec, kIngestFields); !s.ok()) return UsageError("ingest", s.message());
  if (Status s = spec.Check(spec::Spelling::kFlag); !s.ok()) return UsageError("ingest", s.message());

  // 1. Validate every line.
  std::ifstream in(args.positional()[0]);
  if (!in) return Fail("ingest", "cannot open " + args.positional()[0]);
  std::vector<Line> lines;
  std::vector<std::string> errors;
  std::map<std::string, size_t> seen;
  std::string raw;
  for (size_t n = 1; std::getline(in, raw); ++n) {
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    if (raw.find_first_not_of(" \t") == std::string::npos) continue;
    auto bad = [&](const std::string& why) { errors.push_back("line " + std::to_string(n) + ": " + why); };
    auto doc = ParseDocumentLine(raw);
    if (!doc.ok()) { bad(doc.status().message()); continue; }
    if (auto it = seen.find(doc->id); it != seen.end()) { bad("id '" + doc->id + "' repeats line " + std::to_string(it->second)); continue; }
    seen[doc->id] = n;
    lines.push_back({n, std::move(doc).value()});
  }
  if (!errors.empty()) {
    for (size_t i = 0; i < errors.size() && i < 20; ++i) std::cerr << "moeedb ingest: " << errors[i] << "\n";
    if (errors.size() > 20) std::cerr << "moeedb ingest: ... and " << errors.size() - 20 << " more\n";
    return Fail("ingest", std::to_string(errors.size()) + " bad line(s); nothing was stored");
  }
  if (lines.empty()) return Fail("ingest", "no documents in " + args.positional()[0]);

  // 2. The collection, created on first use.
  auto db = OpenDb(args, false);
  if (!db.ok()) return Fail("ingest", db.status().message());
  const std::string name = args.Get("collection");
  auto coll = (*db)->OpenCollection(name);
  if (!coll.ok() && coll.status().code() == Status::Code::kNotFound) {
    if (ModelDirFlag(args).empty())
      return UsageError("ingest", "collection '" + name + "' does not exist and no default model was found: pass --model DIR");
    auto cfg = EmbeddingSpecFromFlags(args);
    if (!cfg.ok()) return UsageError("ingest", cfg.status().message());
    auto setup = (*db)->LoadSetup(*cfg);
    if (!setup.ok()) return Fail("ingest", setup.status().message());
    auto model = (*db)->NewCollectionOptions(**setup);
    if (!model.ok()) return Fail("ingest", model.status().message());
    auto o = spec.NewOptions(*model);
    if (!o.ok()) return Fail("ingest", o.status().message());
    coll = (*db)->CreateCollection(name, *o);
    if (!coll.ok()) return Fail("ingest", coll.status().message());
    std::cerr << "created collection '" << name << "' (" << (*setup)->model().config().Summary() << ")\n";
  } else if (!coll.ok()) {
    return Fail("ingest", coll.status().message());
  } else if (auto setup = (*db)->SetupOf(name); !setup.ok()) {  // before any line is embedded
    return Fail("ingest", setup.status().message());
  }

  // 3. Embed and store, batch by batch.
  Progress progress(lines.size());
  size_t done = 0, replaced = 0;
  for (size_t start = 0; start < lines.size(); start += static_cast<size_t>(batch)) {
    const size_t end = std::min(lines.size(), start + static_cast<size_t>(batch));
    std::vector<StoredDocument> docs;
    for (size_t i = start; i < end; ++i) docs.push_back(lines[i].doc);
    auto w = (*db)->Upsert(name, std::move(docs), /*sync=*/true);
    if (!w.ok()) return Fail("ingest", "line " + std::to_string(lines[start].number) + "+: " + w.status().message());
    done = end;
    replaced += w->removed.size();
    progress.Update(done);
  }
  progress.Update(done, true);
  if (Status s = (*coll)->SaveIndex(); !s.ok()) std::cerr << "warning: index snapshot not saved: " << s.message() << "\n";
  std::cout << json{{"collection", name}, {"ingested", done}, {"replaced", replaced}, {"documents", (*coll)->size()}}.dump()
            << std::endl;
  return 0;
}

int RunSearch(const Args& args) {
  if (args.positional().size() != 1) return UsageError("search", "give exactly one query text");
  SearchSpec so;
  so.query = args.positional()[0];
  if (Status s = ReadSpecFlags(args, SearchFields(), &so); !s.ok()) return UsageError("search", s.message());
  if (Status s = so.Check(spec::Spelling::kFlag); !s.ok()) return UsageError("search", s.message());
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("search", db.status().message());
  auto coll = (*db)->OpenCollection(args.Get("collection"));
  if (!coll.ok()) return Fail("search", coll.status().message());
  const auto t0 = std::chrono::steady_clock::now();
  if (args.Has("group-size") && !args.Has("group-by")) return UsageError("search", "--group-size goes with --group-by");
  if (args.Has("group-by")) {
    const GroupSpec spec{args.Get("group-by"), static_cast<size_t>(args.Int("group-size")), so.k};
    auto groups = (*db)->SearchGroups(args.Get("collection"), so, spec);
    if (!groups.ok()) return Fail("search", groups.status().message());
    json out = json::array();
    for (const auto& g : *groups) {
      json hits = json::array();
      for (const auto& h : g.hits) hits.push_back(SearchHitJson(h, (*coll)->has_lexical()));
      out.push_back({{"value", g.value}, {"hits", hits}});
    }
    std::cout << json{{"groups", out}}.dump() << std::endl;
    return 0;
  }
  auto hits = (*db)->Search(args.Get("collection"), so);  // lexical search runs no model
  if (!hits.ok()) return Fail("search", hits.status().message());
  json out = {{"hits", json::array()}};
  for (const auto& h : *hits) out["hits"].push_back(SearchHitJson(h, (*coll)->has_lexical()));
  out["took_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (args.Get("format", "json") == "text") {
    const float alpha = so.alpha.value_or((*coll)->default_alpha());
    int rank = 0;
    for (const auto& h : *hits) {
      char buf[160];
      switch (so.mode) {
        case QueryMode::kFused:
          std::snprintf(buf, sizeof(buf), "%2d. %.3f = hs %.3f + %.2f x rw %.3f  ", ++rank, h.score, h.score_hs, alpha, h.score_rw);
          break;
        case QueryMode::kHs:
        case QueryMode::kRw: {
          const bool hs = so.mode == QueryMode::kHs;
          std::snprintf(buf, sizeof(buf), "%2d. %s %.3f (%s %.3f)  ", ++rank, hs ? "hs" : "rw", h.score, hs ? "rw" : "hs",
                        hs ? h.score_rw : h.score_hs);
          break;
        }
        case QueryMode::kLexical:
          std::snprintf(buf, sizeof(buf), "%2d. bm25 %.3f  ", ++rank, h.score);
          break;
        case QueryMode::kHybrid:
          std::snprintf(buf, sizeof(buf), "%2d. %.4f (hs %.3f rw %.3f bm25 %.3f)  ", ++rank, h.score, h.score_hs, h.score_rw,
                        h.score_lex);
          break;
      }
      std::cout << buf << "[" << h.id << "] " << h.text << "\n";
    }
    std::cout << std::flush;
    return 0;
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

int RunGet(const Args& args) {
  if (args.positional().empty()) return UsageError("get", "no document ids given");
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("get", db.status().message());
  int missing = 0;
  for (const auto& id : args.positional()) {
    auto d = (*db)->GetDocument(args.Get("collection"), id);
    if (!d.ok()) return Fail("get", d.status().message());
    if (!d->has_value()) {
      std::cerr << "moeedb get: no document '" << id << "'\n";
      ++missing;
      continue;
    }
    json j = DocumentJson(**d);
    if (args.Has("vectors")) {
      j["hs"] = (*d)->hs;
      j["rw"] = (*d)->rw;
    }
    std::cout << j.dump() << "\n";
  }
  std::cout << std::flush;
  return missing ? 1 : 0;
}

int RunDelete(const Args& args) {
  if (args.positional().empty()) return UsageError("delete", "no document ids given");
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("delete", db.status().message());
  auto coll = (*db)->OpenCollection(args.Get("collection"));
  if (!coll.ok()) return Fail("delete", coll.status().message());
  auto r = (*coll)->Delete(args.positional());
  if (!r.ok()) return Fail("delete", r.status().message());
  std::cout << json{{"deleted", r->removed.size()}, {"not_found", r->not_found}}.dump() << std::endl;
  return 0;
}

int RunCollectionsList(const Args& args) {
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("collections list", db.status().message());
  auto all = (*db)->ListCollections();
  if (!all.ok()) return Fail("collections list", all.status().message());
  json out = json::array();
  for (const auto& c : *all) out.push_back({{"name", c.name}, {"documents", c.count}});
  std::cout << out.dump() << std::endl;
  return 0;
}

int RunCollectionsInfo(const Args& args) {
  if (args.positional().size() != 1) return UsageError("collections info", "needs one collection NAME");
  auto db = OpenDb(args, true);
  auto c = db.ok() ? (*db)->GetCollection(args.positional()[0]) : Result<CollectionRecord>(db.status());
  if (!c.ok()) return Fail("collections info", c.status().message());
  json spec = json::parse(c->spec_json);
  spec.erase("std_hs");
  spec.erase("std_rw");
  std::cout << json{{"name", c->name}, {"documents", c->count}, {"spec", spec}}.dump() << std::endl;
  return 0;
}

int RunCollectionsDrop(const Args& args) {
  if (args.positional().size() != 1) return UsageError("collections drop", "needs one collection NAME");
  const std::string& name = args.positional()[0];
  auto db = OpenDb(args, true);
  if (Status s = db.ok() ? (*db)->DropCollection(name) : db.status(); !s.ok()) return Fail("collections drop", s.message());
  std::cout << json{{"dropped", name}}.dump() << std::endl;
  return 0;
}

int RunCollectionsIndex(const Args& args) {
  if (args.positional().size() != 1) return UsageError("collections index", "needs one collection NAME");
  if (args.Has("kind") == args.Has("drop")) return UsageError("collections index", "give --kind KIND or --drop");
  std::optional<PayloadFieldKind> kind;
  if (args.Has("kind")) {
    auto k = kPayloadFieldKinds.Parse(args.Get("kind"));
    if (!k.ok()) return UsageError("collections index", k.status().message());
    kind = *k;
  }
  const std::string& name = args.positional()[0];
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("collections index", db.status().message());
  if (Status s = (*db)->SetPayloadIndex(name, args.Get("key"), kind); !s.ok()) return Fail("collections index", s.message());
  auto c = (*db)->OpenCollection(name);
  if (!c.ok()) return Fail("collections index", c.status().message());
  if (Status s = (*c)->SaveIndex(); !s.ok()) std::cerr << "warning: index snapshot not saved: " << s.message() << "\n";
  std::cout << json{{"collection", name}, {"payload_indexes", PayloadIndexFieldsToJson((*c)->payload_indexes())},
                    {"points", (*c)->PayloadIndexPoints()}}.dump()
            << std::endl;
  return 0;
}

int RunScroll(const Args& args) {
  ScanSpec scan;
  if (Status s = scan.SetFilter(args.Get("filter")); !s.ok()) return UsageError("scroll", s.message());
  if (args.Has("desc") && !args.Has("order-by")) return UsageError("scroll", "--desc orders by --order-by's field: give it");
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("scroll", db.status().message());
  auto c = (*db)->OpenCollection(args.Get("collection"));
  if (!c.ok()) return Fail("scroll", c.status().message());
  const size_t limit = static_cast<size_t>(args.Int("limit"));
  json docs = json::array();
  json out;
  if (args.Has("order-by")) {
    OrderBySpec order;
    order.key = args.Get("order-by");
    order.descending = args.Has("desc");
    auto page = ScanOrdered(**c, scan, order, limit);
    if (!page.ok()) return Fail("scroll", page.status().message());
    for (const auto& o : *page) {
      json d = DocumentJson(o.doc);
      d["order_value"] = o.value;
      docs.push_back(std::move(d));
    }
    out = {{"documents", docs}};
  } else {
    scan.start = args.Get("after");
    scan.limit = limit;
    auto page = Scan(**c, scan);
    if (!page.ok()) return Fail("scroll", page.status().message());
    for (const auto& d : page->documents) docs.push_back(DocumentJson(d));
    out = {{"documents", docs}, {"next_after", page->next.empty() ? json(nullptr) : json(page->next)}};
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

int RunFacet(const Args& args) {
  ScanSpec scan;
  if (Status s = scan.SetFilter(args.Get("filter")); !s.ok()) return UsageError("facet", s.message());
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("facet", db.status().message());
  auto c = (*db)->OpenCollection(args.Get("collection"));
  if (!c.ok()) return Fail("facet", c.status().message());
  auto hits = Facet(**c, scan, args.Get("key"), static_cast<size_t>(args.Int("limit")));
  if (!hits.ok()) return Fail("facet", hits.status().message());
  json out = json::array();
  for (const auto& h : *hits) out.push_back({{"value", h.value}, {"count", h.count}});
  std::cout << json{{"hits", out}}.dump() << std::endl;
  return 0;
}

int RunCheckpoint(const Args& args) {
  auto db = OpenDb(args, true);
  if (!db.ok()) return Fail("checkpoint", db.status().message());
  Status s = (*db)->Checkpoint(args.Get("out"));
  if (!s.ok()) return Fail("checkpoint", s.message());
  std::cout << json{{"checkpoint", args.Get("out")}}.dump() << std::endl;
  return 0;
}

}  // namespace moeedb::cli
