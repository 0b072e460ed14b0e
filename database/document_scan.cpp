#include "database/document_scan.h"

#include <algorithm>

namespace moeedb {

namespace {

constexpr size_t kPage = 1000;

bool Keeps(const VectorCollection& c, const ScanSpec& spec, const StoredDocument& d) {
  if (spec.filter && !FilterKeeps(c, *spec.filter, d)) return false;
  return !spec.text_test || spec.text_test(d.text);
}

// Calls `take` with each kept document in order until it returns false.
Status Each(const VectorCollection& c, const ScanSpec& spec, const std::function<bool(StoredDocument&&)>& take) {
  if (spec.ids) {
    for (const std::string& id : *spec.ids) {
      if (!spec.start.empty() && IdOrderKey(id) < IdOrderKey(spec.start)) continue;  // the listing's order
      MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> d, c.Get(id));
      if (!d) continue;
      const bool kept = Keeps(c, spec, *d);
      d->hs.clear();
      d->rw.clear();
      if (kept && !take(std::move(*d))) return Status::OK();
    }
    return Status::OK();
  }
  // ListDocuments starts after an id: the start itself is read first.
  std::string after;
  if (!spec.start.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> first, c.Get(spec.start));
    if (first) {
      const bool kept = Keeps(c, spec, *first);
      first->hs.clear();
      first->rw.clear();
      if (kept && !take(std::move(*first))) return Status::OK();
    }
    after = spec.start;
  }
  for (;;) {
    MOEEDB_ASSIGN_OR_RETURN(DocumentPage page, c.List(after, kPage));
    for (StoredDocument& d : page.documents)
      if (Keeps(c, spec, d) && !take(std::move(d))) return Status::OK();
    if (page.next_after.empty()) return Status::OK();
    after = page.next_after;
  }
}

}  // namespace

bool FilterKeeps(const VectorCollection& c, const MetadataFilter& filter, const StoredDocument& d) {
  // Listed documents come without vectors: a $has_vector condition reads them.
  std::vector<std::string> carried;
  if (filter.UsesVectors()) {
    std::vector<float> rw = d.rw;
    if (rw.empty()) {
      auto full = c.Get(d.id);
      if (full.ok() && full->has_value()) rw = (*full)->rw;
    }
    carried = c.schema().CarriedBy(rw);
  }
  return MatchesDocument(filter, d.metadata_json, d.id, &carried);
}

Status ScanSpec::SetFilter(const std::string& filter_json) {
  filter.reset();
  if (filter_json.empty() || filter_json == "{}") return Status::OK();
  MOEEDB_ASSIGN_OR_RETURN(filter, MetadataFilter::Parse(filter_json));
  return Status::OK();
}

Result<ScanPage> Scan(const VectorCollection& c, const ScanSpec& spec) {
  ScanPage out;
  size_t skipped = 0;
  MOEEDB_RETURN_IF_ERROR(Each(c, spec, [&](StoredDocument&& d) {
    if (skipped < spec.skip) {
      ++skipped;
      return true;
    }
    if (out.documents.size() == spec.limit) {
      out.next = d.id;
      return false;
    }
    out.documents.push_back(std::move(d));
    return true;
  }));
  return out;
}

Result<std::vector<std::string>> SelectedIds(const VectorCollection& c, const ScanSpec& spec) {
  if (spec.ids) return *spec.ids;
  MOEEDB_ASSIGN_OR_RETURN(ScanPage page, Scan(c, spec));
  std::vector<std::string> ids;
  for (const auto& d : page.documents) ids.push_back(d.id);
  return ids;
}

Result<size_t> CountMatching(const VectorCollection& c, const ScanSpec& spec) {
  if (!spec.filter && !spec.text_test && !spec.ids && spec.start.empty()) {
    const size_t n = c.size();
    return std::min(n - std::min(n, spec.skip), spec.limit);
  }
  size_t n = 0, skipped = 0;
  MOEEDB_RETURN_IF_ERROR(Each(c, spec, [&](StoredDocument&&) {
    if (skipped < spec.skip) {
      ++skipped;
      return true;
    }
    return ++n < spec.limit;
  }));
  return n;
}

}  // namespace moeedb
