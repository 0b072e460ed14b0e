#include "database/document_update.h"

#include "database/client_vectors.h"

#include <functional>

namespace moeedb {

using json = nlohmann::json;

namespace {

constexpr int kTries = 8;

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t dot = path.find('.', at);
    out.push_back(path.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) return out;
    at = dot + 1;
  }
}

Status CheckPath(const std::string& path, const std::string& what) {
  if (path.find('[') != std::string::npos)
    return Status::InvalidArgument(what + " '" + path.substr(0, 80) +
                                   "': paths into arrays (a[].b) are not supported by moeedb; name an object key or a dotted path");
  for (const auto& part : Split(path))
    if (part.empty()) return Status::InvalidArgument(what + " '" + path.substr(0, 80) + "' has an empty part");
  return Status::OK();
}

// Removes `path` from `j`: the key itself when `j` has it, else the dotted path.
void Erase(json* j, const std::string& path) {
  if (!j->is_object()) return;
  if (j->contains(path)) {
    j->erase(path);
    return;
  }
  json* at = j;
  const auto parts = Split(path);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!at->is_object() || !at->contains(parts[i])) return;
    at = &(*at)[parts[i]];
  }
  if (at->is_object()) at->erase(parts.back());
}

}  // namespace

Status MetadataChange::Validate() const {
  if ((kind == Kind::kSet || kind == Kind::kOverwrite) && !values.is_object())
    return Status::InvalidArgument("'payload' must be an object");
  if (kind == Kind::kSet && !at.empty()) {
    auto key = PayloadKey::Parse(at);
    if (!key.ok()) return Status::InvalidArgument("key '" + at.substr(0, 80) + "': " + key.status().message());
  }
  if (kind == Kind::kDeleteKeys) {
    if (keys.empty()) return Status::InvalidArgument("'keys' must name at least one key");
    for (const auto& k : keys) MOEEDB_RETURN_IF_ERROR(CheckPath(k, "key"));
  }
  return Status::OK();
}

json MetadataChange::Apply(json metadata) const {
  if (!metadata.is_object()) metadata = json::object();
  switch (kind) {
    case Kind::kOverwrite: return values;
    case Kind::kClear: return json::object();
    case Kind::kDeleteKeys:
      for (const auto& k : keys) Erase(&metadata, k);
      return metadata;
    case Kind::kSet: {
      if (at.empty()) {
        metadata.update(values);
        return metadata;
      }
      auto key = PayloadKey::Parse(at);  // checked by Validate
      if (key.ok()) key->MergeInto(&metadata, values);
      return metadata;
    }
  }
  return metadata;
}

Result<WriteResult> DeleteDocuments(VectorCollection* c, const ScanSpec& which, bool sync) {
  MOEEDB_ASSIGN_OR_RETURN(std::vector<std::string> ids, SelectedIds(*c, which));
  if (ids.empty()) return WriteResult{};
  return c->Delete(ids, sync);
}

Result<WriteResult> ChangeDocuments(VectorCollection* c, const ScanSpec& which,
                                    const std::function<Result<bool>(StoredDocument*)>& change, bool sync) {
  for (int attempt = 0; attempt < kTries; ++attempt) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<std::string> ids, SelectedIds(*c, which));
    std::vector<StoredDocument> docs;
    std::vector<uint64_t> expected;
    bool changed_meanwhile = false;
    for (const std::string& id : ids) {
      MOEEDB_ASSIGN_OR_RETURN(std::optional<uint64_t> internal, c->InternalId(id));
      if (!internal) {
        if (which.ids) return Status::NotFound("no point with id " + id.substr(0, 80) + " in " + c->name());
        continue;  // deleted since the scan
      }
      auto d = c->GetByInternal(*internal);
      if (!d.ok() && d.status().code() == Status::Code::kNotFound) {
        changed_meanwhile = true;  // replaced between the two reads
        break;
      }
      if (!d.ok()) return d.status();
      // A filter keeps what it keeps now (the document may have changed since the scan).
      if (!which.ids && which.filter && !FilterKeeps(*c, *which.filter, *d)) continue;
      MOEEDB_ASSIGN_OR_RETURN(const bool changed, change(&d.value()));
      if (!changed) continue;
      docs.push_back(std::move(d).value());
      expected.push_back(*internal);
    }
    if (changed_meanwhile) continue;
    if (docs.empty()) return WriteResult{};
    auto w = c->UpsertIfUnchanged(docs, expected, sync);
    if (w.ok() || w.status().code() != Status::Code::kConflict) return w;
  }
  return Status::Unavailable("the documents of " + c->name() + " kept changing under other writes: nothing was changed; retry");
}

Result<WriteResult> ChangeMetadata(VectorCollection* c, const ScanSpec& which, const MetadataChange& change, bool sync) {
  MOEEDB_RETURN_IF_ERROR(change.Validate());
  return ChangeDocuments(
      c, which,
      [&](StoredDocument* d) -> Result<bool> {
        const json before = json::parse(d->metadata_json.empty() ? "{}" : d->metadata_json, nullptr, false);
        const json after = change.Apply(before);
        if (d->text == PayloadText(c->schema(), before)) d->text = PayloadText(c->schema(), after);
        d->metadata_json = after.dump();
        return true;
      },
      sync);
}

Result<WriteResult> UpsertWhere(VectorCollection* c, const std::vector<StoredDocument>& docs, const UpsertCondition& condition,
                                bool sync) {
  for (int attempt = 0; attempt < kTries; ++attempt) {
    std::vector<StoredDocument> written;
    std::vector<uint64_t> expected;  // the internal id each was read under; 0: absent
    bool changed_meanwhile = false;
    for (const StoredDocument& d : docs) {
      MOEEDB_ASSIGN_OR_RETURN(std::optional<uint64_t> internal, c->InternalId(d.id));
      if (!internal) {
        if (condition.update_only) continue;
      } else {
        if (condition.insert_only) continue;
        if (condition.filter) {
          auto now = c->GetByInternal(*internal);
          if (!now.ok() && now.status().code() == Status::Code::kNotFound) {
            changed_meanwhile = true;  // replaced between the two reads: decide on its new version
            break;
          }
          if (!now.ok()) return now.status();
          if (!FilterKeeps(*c, *condition.filter, *now)) continue;
        }
      }
      written.push_back(d);
      expected.push_back(internal.value_or(0));
    }
    if (changed_meanwhile) continue;
    if (written.empty()) return WriteResult{};
    auto w = c->UpsertIfUnchanged(written, expected, sync);
    if (w.ok() || w.status().code() != Status::Code::kConflict) return w;
  }
  return Status::Unavailable("the points of " + c->name() + " kept changing under other writes: nothing was written; retry");
}

Result<WriteResult> SetVectors(VectorCollection* c, const std::map<std::string, ClientVector>& vectors, bool sync,
                               const std::shared_ptr<const MetadataFilter>& only_where) {
  ScanSpec which;
  which.ids = std::vector<std::string>();
  for (const auto& [id, v] : vectors) which.ids->push_back(id);
  return ChangeDocuments(
      c, which,
      [&](StoredDocument* d) -> Result<bool> {
        if (only_where && !FilterKeeps(*c, *only_where, *d)) return false;  // left as it is
        const ClientVector& given = vectors.at(d->id);
        ClientVector now = FromStoredVectors(*c, *d);
        if (!given.unnamed.empty()) now.unnamed = given.unnamed;
        if (!given.hs.empty()) now.hs = given.hs;
        if (!given.rw.empty()) now.rw = given.rw;
        for (const auto& [name, x] : given.named) now.named[name] = x;
        StoredDocument changed = *d;
        MOEEDB_RETURN_IF_ERROR(ToStoredVectors(*c, now, &changed));
        *d = std::move(changed);
        return true;
      },
      sync);
}

Result<WriteResult> RemoveVectors(VectorCollection* c, const ScanSpec& which, const std::vector<std::string>& names,
                                  bool sync) {
  if (c->schema().kind != VectorKind::kPlain)
    return Status::InvalidArgument("the vectors of collection '" + c->name() +
                                   "' are the served model's: every point keeps them (delete the point instead)");
  for (const std::string& name : names) MOEEDB_RETURN_IF_ERROR(c->schema().Find(name).status());
  return ChangeDocuments(
      c, which,
      [&](StoredDocument* d) -> Result<bool> {
        ClientVector now = FromStoredVectors(*c, *d);
        for (const std::string& name : names) (name.empty() ? now.unnamed : now.named[name]).clear();
        for (auto it = now.named.begin(); it != now.named.end();) it = it->second.empty() ? now.named.erase(it) : std::next(it);
        MOEEDB_RETURN_IF_ERROR(ToStoredVectors(*c, now, d));
        return true;
      },
      sync);
}

}  // namespace moeedb
