// Document scans: a collection's stored documents in id order that a spec
// keeps (a metadata filter, a test of the text, a list of ids), read from the
// store (the truth) page by page. What every front end's scroll, count, get
// and delete-by-filter run on: Qdrant's scroll, count and delete, Chroma's
// get and delete, payload updates by filter (document_update.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/vector_collection.h"
#include "index/metadata_filter.h"

namespace moeedb {

struct ScanSpec {
  std::shared_ptr<const MetadataFilter> filter;            // nullptr: every document
  std::function<bool(const std::string& text)> text_test;  // empty: any text
  // Only these ids, in this order (absent ones left out); std::nullopt: every id, in id order.
  std::optional<std::vector<std::string>> ids;
  std::string start;                                        // the first id considered, inclusive ("" the first)
  size_t skip = 0;                                          // matching documents passed over first
  size_t limit = SIZE_MAX;                                  // matching documents returned at most

  // `filter` from moeedb's filter JSON text ("" or {} for none): InvalidArgument naming the bad part.
  Status SetFilter(const std::string& filter_json);
};

struct ScanPage {
  std::vector<StoredDocument> documents;  // without vectors
  std::string next;                       // the first match after the page ("" when there is none)
};

// Whether `filter` keeps stored document `d`: its metadata, its id, and the
// vectors it carries (read from the store when `d` came without them and
// the filter asks; VectorSchema::CarriedBy).
bool FilterKeeps(const VectorCollection& c, const MetadataFilter& filter, const StoredDocument& d);

// The documents `spec` keeps. Reads the store in pages of up to 1000, so a
// scan of a large collection holds no more than a page beyond its answer.
Result<ScanPage> Scan(const VectorCollection& c, const ScanSpec& spec);
// The ids `spec` names (its ids as given, stored or not), else the ids of the
// documents it keeps.
Result<std::vector<std::string>> SelectedIds(const VectorCollection& c, const ScanSpec& spec);
// How many documents `spec` keeps (skip and limit apply); the collection's
// size without reading it when nothing narrows the scan.
Result<size_t> CountMatching(const VectorCollection& c, const ScanSpec& spec);

}  // namespace moeedb
