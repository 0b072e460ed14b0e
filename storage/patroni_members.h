// The PostgreSQL servers Patroni names: the primary now, and the synchronous
// standbys that hold every acknowledged commit. Always on Patroni's word,
// never on a postgres's own: a postgres whose Patroni died keeps running and
// stays writable (it still believes it is the primary), and once the leader
// key expires another server is promoted; a client that found the primary by
// asking the servers (libpq's target_session_attrs=read-write) would go on
// writing to the old one. Asking Patroni fences it: its REST API is gone with
// it, so no primary is named until the new one is. Likewise a read while no
// primary answers goes to a synchronous standby only, never to an
// asynchronous one (behind) or to an old primary (commits never
// acknowledged).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

class PatroniMembers {
 public:
  // An answer is reused this long. It bounds how long a node keeps writing to
  // a primary whose Patroni died: far below the leader key's TTL, so no other
  // server is promoted meanwhile (docs/cluster.md, "Finding the primary").
  static constexpr std::chrono::milliseconds kFresh{500};
  // Recheck() asks again once the answer is this old.
  static constexpr std::chrono::milliseconds kRecheck{100};
  // Each REST call's deadline.
  static constexpr std::chrono::milliseconds kDeadline{1000};

  // `rest`: the Patroni REST APIs, "host:port" separated by commas (any of
  // them tells which member leads). InvalidArgument if one is malformed.
  static Result<std::unique_ptr<PatroniMembers>> Parse(const std::string& rest);

  // "host:port" of the primary's PostgreSQL: the member that GET /cluster on
  // a Patroni names leader (the next is asked if that leader does not
  // answer), when that member's own Patroni answers 200 to GET /primary (it
  // holds the leader lock by its own lease). Unavailable while none does (a
  // failover under way, every Patroni unreachable).
  Result<std::string> Primary();

  // "host:port" of each member GET /cluster names sync_standby (the names in
  // Patroni's /sync key, which a primary in strict synchronous mode waits
  // for before it acknowledges a commit), from the same answer as Primary().
  // Unavailable when no Patroni answers or none is named.
  Result<std::vector<std::string>> SynchronousStandbys();
  // Asks Patroni again now if the answer is older than kRecheck (a caller
  // that found neither a primary nor a synchronous standby to read from).
  void Recheck();

 private:
  struct Answer {
    Result<std::string> primary = Status::Unavailable("Patroni not asked yet");
    Result<std::vector<std::string>> sync_standbys = Status::Unavailable("Patroni not asked yet");
  };
  explicit PatroniMembers(std::vector<std::string> rest) : rest_(std::move(rest)) {}
  const Answer& Fresh();  // last_, asked again once older than kFresh; mu_ held
  Answer Ask();

  std::vector<std::string> rest_;
  std::mutex mu_;
  size_t answered_ = 0;  // the endpoint that answered last: asked first
  std::chrono::steady_clock::time_point asked_at_{};
  Answer last_;
};

}  // namespace moeedb
