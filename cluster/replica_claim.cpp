#include "cluster/replica_claim.h"

namespace moeedb::cluster {

using json = nlohmann::json;

const char* StateName(ReplicaClaim::State state) {
  switch (state) {
    case ReplicaClaim::State::kReady: return "ready";
    case ReplicaClaim::State::kBuilding: return "building";
    case ReplicaClaim::State::kStale: return "stale";
  }
  return "stale";
}

json ReplicaClaim::ToJson() const {
  return {{"state", StateName(state)}, {"store_id", store_id},       {"applied_seq", applied_seq},
          {"documents", documents},    {"index_bytes", index_bytes}, {"address", address}};
}

std::optional<ReplicaClaim> ReplicaClaim::FromJson(const json& value) {
  if (!value.is_object() || !value.contains("state") || !value["state"].is_string()) return std::nullopt;
  ReplicaClaim c;
  const std::string state = value["state"];
  if (state == "ready") c.state = State::kReady;
  else if (state == "building") c.state = State::kBuilding;
  else if (state == "stale") c.state = State::kStale;
  else return std::nullopt;
  // A field of the wrong type reads as absent: a claim from a newer node stays readable.
  const auto number = [&](const char* key) -> uint64_t {
    auto it = value.find(key);
    return it != value.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
  };
  c.store_id = static_cast<uint32_t>(number("store_id"));
  c.applied_seq = number("applied_seq");
  c.documents = number("documents");
  c.index_bytes = number("index_bytes");
  if (auto it = value.find("address"); it != value.end() && it->is_string()) c.address = *it;
  return c;
}

bool ReplicaClaim::operator==(const ReplicaClaim& o) const {
  return state == o.state && store_id == o.store_id && applied_seq == o.applied_seq && documents == o.documents &&
         index_bytes == o.index_bytes && address == o.address;
}

}  // namespace moeedb::cluster
