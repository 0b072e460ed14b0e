#include "storage/patroni_members.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/http_client.h"

namespace moeedb {

namespace {

// "http://host:port/patroni" (a member's api_url) -> "host:port".
std::string HostPortOfUrl(const std::string& url) {
  size_t start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  const size_t end = url.find('/', start);
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

bool IsHostPort(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  for (size_t i = colon + 1; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

}  // namespace

Result<std::unique_ptr<PatroniMembers>> PatroniMembers::Parse(const std::string& rest) {
  std::vector<std::string> endpoints;
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t comma = rest.find(',', start);
    const std::string one = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!IsHostPort(one))
      return Status::InvalidArgument("patroni=" + rest + ": '" + one + "' is not HOST:PORT of a Patroni REST API");
    endpoints.push_back(one);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return std::unique_ptr<PatroniMembers>(new PatroniMembers(std::move(endpoints)));
}

const PatroniMembers::Answer& PatroniMembers::Fresh() {
  const auto now = std::chrono::steady_clock::now();
  if (asked_at_ == std::chrono::steady_clock::time_point{} || now - asked_at_ >= kFresh) {
    asked_at_ = now;  // the answer's age counts from before the asking
    last_ = Ask();
  }
  return last_;
}

void PatroniMembers::Recheck() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - asked_at_ < kRecheck) return;
  asked_at_ = now;
  last_ = Ask();
}

Result<std::string> PatroniMembers::Primary() {
  std::lock_guard<std::mutex> lock(mu_);
  return Fresh().primary;
}

Result<std::vector<std::string>> PatroniMembers::SynchronousStandbys() {
  std::lock_guard<std::mutex> lock(mu_);
  return Fresh().sync_standbys;
}

PatroniMembers::Answer PatroniMembers::Ask() {
  using json = nlohmann::json;
  Answer answer;
  std::string why = "no Patroni REST API answered";
  std::vector<std::string> asked;  // leaders' REST APIs already asked
  bool standbys_known = false;     // from the first /cluster that answered
  // Each Patroni's view of the cluster (served from its own cache of etcd,
  // so one may lag a failover): the first leader whose own Patroni answers
  // 200 to GET /primary.
  for (size_t k = 0; k < rest_.size(); ++k) {
    const size_t i = (answered_ + k) % rest_.size();
    auto cluster = HttpGet(rest_[i], "/cluster", kDeadline);
    if (!cluster.ok() || cluster->status != 200) continue;
    const json j = json::parse(cluster->body, nullptr, false);
    if (!j.is_object() || !j.contains("members") || !j["members"].is_array()) {
      why = "Patroni at " + rest_[i] + " answered GET /cluster without members";
      continue;
    }
    if (!standbys_known) {
      standbys_known = true;
      std::vector<std::string> sync;
      for (const json& m : j["members"])
        if (m.is_object() && m.value("role", "") == "sync_standby" && m.contains("host") && m["host"].is_string() &&
            m.contains("port") && m["port"].is_number_integer())
          sync.push_back(m["host"].get<std::string>() + ":" + std::to_string(m["port"].get<int>()));
      if (sync.empty())
        answer.sync_standbys = Status::Unavailable("Patroni at " + rest_[i] + " names no synchronous standby");
      else
        answer.sync_standbys = std::move(sync);
    }
    why = "Patroni at " + rest_[i] + " names no leader (a failover under way)";
    for (const json& m : j["members"]) {
      if (!m.is_object() || m.value("role", "") != "leader") continue;
      const std::string leader = m.value("name", "?");
      if (!m.contains("host") || !m["host"].is_string() || !m.contains("port") || !m["port"].is_number_integer() ||
          !m.contains("api_url") || !m["api_url"].is_string()) {
        why = "Patroni's leader " + leader + " has no address yet";
        break;
      }
      const std::string api = HostPortOfUrl(m["api_url"].get<std::string>());
      if (std::find(asked.begin(), asked.end(), api) != asked.end()) break;
      asked.push_back(api);
      // The leader key may outlive its Patroni by the key's TTL: only the
      // leader's own Patroni, answering, says it holds the leader lock.
      auto primary = HttpGet(api, "/primary", kDeadline);
      if (!primary.ok()) {
        why = "the Patroni of leader " + leader + " does not answer: " + primary.status().message();
        break;
      }
      if (primary->status != 200) {
        why = "the Patroni of leader " + leader + " answers " + std::to_string(primary->status) + " to GET /primary";
        break;
      }
      answered_ = i;
      answer.primary = m["host"].get<std::string>() + ":" + std::to_string(m["port"].get<int>());
      return answer;
    }
  }
  answer.primary = Status::Unavailable(why);
  if (!standbys_known) answer.sync_standbys = Status::Unavailable(why);
  return answer;
}

}  // namespace moeedb
