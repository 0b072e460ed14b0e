// GET /cluster: the cluster this node is part of (docs/cluster.md), as
// `moeedb cluster status` prints it; what the web console's cluster page reads.
#include "plugin/server/protocols/router.h"

namespace moeedb {
namespace {

class ClusterRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override {
    return parts.size() == 1 && parts[0] == "cluster";
  }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;
  HttpResponse Status() const {
    auto status = core_->db().ClusterStatus();
    if (!status.ok()) return NativeFromStatus(status.status());
    return {200, "application/json", *status};
  }
};

using Handler = HttpResponse (ClusterRouter::*)() const;
constexpr Route<Handler> kRoutes[] = {{"GET", "/cluster", &ClusterRouter::Status}};

HttpResponse ClusterRouter::Handle(const RouteRequest& req, std::string* route) {
  return RouteTo(*this, kRoutes, req, 0, "", route, [&](Handler h, const std::vector<std::string>&) { return (this->*h)(); });
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewClusterRouter(ServerCore* core) { return std::make_unique<ClusterRouter>(core); }

}  // namespace moeedb
