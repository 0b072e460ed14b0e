// ReplicaClaim: what a node says in etcd about one replica it holds
// (replicas/<collection>/<shard>/<node>, on the node's lease; placement.h).
// Only a "ready" claim of the collection's current store id is asked.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace moeedb::cluster {

struct ReplicaClaim {
  enum class State {
    kReady,     // caught up and reading the change log: searched
    kBuilding,  // being rebuilt (a rewound log, a new replica): passed over
    kStale,     // has not read the change log within the staleness bound: passed over
  };
  State state = State::kReady;
  uint32_t store_id = 0;  // the collection as created: a recreated one has another
  uint64_t applied_seq = 0;
  uint64_t documents = 0;
  uint64_t index_bytes = 0;
  std::string address;  // the node's API, host:port

  nlohmann::json ToJson() const;
  // std::nullopt for a value that is not a claim (no or an unknown state).
  static std::optional<ReplicaClaim> FromJson(const nlohmann::json& value);
  bool operator==(const ReplicaClaim& o) const;
};

const char* StateName(ReplicaClaim::State state);

}  // namespace moeedb::cluster
