// moeedb serve: the HTTP server, until SIGTERM or SIGINT (graceful).
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <fstream>
#include <sstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/kernels/runtime.h"
#include "plugin/cli/args.h"
#include "cluster/cluster_node.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"
#include "plugin/server/api.h"
#include "plugin/server/embed_queues.h"
#include "database/database.h"
#include "plugin/server/http_server.h"
#include "database/embedding_setup.h"
#include "database/vector_collection.h"

namespace moeedb::cli {

namespace {

// OpenMP worker threads that spin while idle take the cores the HTTP threads
// need between model rounds (measured: docs/perf.md, server load). libgomp
// reads OMP_WAIT_POLICY when it is loaded, before main, so the server
// re-executes itself once with PASSIVE unless the user chose a policy.
void ReexecWithPassiveOpenMp(const std::vector<std::string>& argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  std::vector<std::string> all = {"moeedb", "serve"};
  all.insert(all.end(), argv.begin(), argv.end());
  std::vector<char*> cargv;
  for (auto& a : all) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execv("/proc/self/exe", cargv.data());
  // execv only returns on failure: serve as we are.
}

}  // namespace

namespace {

// The served setup of the embedding routes: the flags, and for every setting
// they leave out, what the database's first collection recorded (model
// folder, routing, prompt, poolings), so a database made by the CLI is served
// as it is. Every collection is embedded with its own recorded setup whatever
// this one is.
Status AdoptRecordedSetup(Database& db, const Args& args, EmbeddingSpec* cfg) {
  MOEEDB_ASSIGN_OR_RETURN(auto records, db.ListCollections());
  if (records.empty()) return Status::OK();
  MOEEDB_ASSIGN_OR_RETURN(std::string info, VectorCollection::RecordedInfo(records[0]));
  MOEEDB_ASSIGN_OR_RETURN(EmbeddingSpec recorded, RecordedSetup(info));
  const std::pair<const char*, std::string EmbeddingSpec::*> fields[] = {
      {"model", &EmbeddingSpec::model_dir}, {"routing", &EmbeddingSpec::routing},
      {"prompt", &EmbeddingSpec::prompt},   {"hs-pooling", &EmbeddingSpec::hs_pooling},
      {"rw-pooling", &EmbeddingSpec::rw_pooling}};
  for (const auto& [flag, field] : fields)
    if (!args.Has(flag) && !(recorded.*field).empty()) cfg->*field = recorded.*field;
  return Status::OK();
}

}  // namespace

int RunServe(const Args& args) {
  if (ModelDirFlag(args).empty()) return UsageError("serve", "no default model was found: pass --model DIR");
  ReexecWithPassiveOpenMp(args.argv());
  const long long port = args.Int("port");
  const long long qdrant_port = args.Int("qdrant-port");
  const long long chroma_port = args.Int("chroma-port");
  const long long threads = args.Int("threads");
  const long long body = args.Int("max-body-bytes");
  const long long inputs = args.Int("max-inputs");
  const long long tokens = args.Int("max-tokens");
  const long long queue = args.Int("queue");
  const long long batch_tokens = args.Int("batch-tokens");
  const long long conns = args.Int("max-connections");
  const long long forward_tokens = args.Int("forward-tokens");
  const long long workers = args.Int("workers");
  const long long idle = args.Int("idle-timeout");
  const long long request_timeout = args.Int("request-timeout");

  ApiOptions ao;
  ao.api_key = args.Get("api-key");
  if (args.Has("api-key-file")) {
    std::ifstream in(args.Get("api-key-file"));
    if (!in || !std::getline(in, ao.api_key) || ao.api_key.empty()) return Fail("serve", "cannot read an API key from " + args.Get("api-key-file"));
  }
  ao.max_inputs = static_cast<size_t>(inputs);
  ao.max_tokens_per_input = static_cast<size_t>(tokens);
  ao.truncate = args.Has("truncate");

  // Two single-threaded workers beat one two-threaded one on 2 cores: no
  // OpenMP team wakes up for every small op of a small forward (docs/perf.md,
  // "Server load"). One queue per setup embedded with (the served one and
  // each collection's).
  const int compute_threads = ComputeThreads();
  EmbedQueueOptions qo;
  qo.capacity = static_cast<size_t>(queue);
  qo.max_batch_tokens = batch_tokens;
  qo.workers = static_cast<int>(workers);
  qo.threads_per_worker = workers > 1 ? std::max(1, compute_threads / static_cast<int>(workers)) : 0;
  EmbedQueues queues(qo);
  DatabaseOptions dbo;
  if (Status s = ReadWeightFormatFlags(args, &dbo.compute); !s.ok()) return UsageError("serve", s.message());
  dbo.compute.cache_dir = DefaultCacheDir();
  dbo.compute.threads = static_cast<int>(threads);
  dbo.compute.workers = 1;  // the queue's workers (--workers) split the rounds; a setup's own would idle
  // A round (all waiting requests, up to --batch-tokens) runs as forward
  // passes of --forward-tokens padded tokens, by default the CLI's forward
  // size (EmbedderOptions): the same speed per token as `moeedb embed`.
  dbo.compute.batch_tokens = forward_tokens;
  dbo.embed = QueuedEmbedFunction(ao, &queues);
  dbo.index_dir = args.Get("index-dir");
  dbo.max_staleness_ms = static_cast<uint64_t>(args.Int("max-staleness-ms"));
  dbo.max_lag_entries = static_cast<uint64_t>(args.Int("max-lag-entries"));
  // A cluster node joins before the database opens: its collections' shards
  // are the ones the placement gives this node.
  std::unique_ptr<cluster::ClusterNode> node;
  const bool https = args.Has("tls-cert") || args.Has("tls-key");
  if (https) {  // checked before anything loads: a bad file is a usage error, said at once
    auto checked = TlsContext::Server({"", args.Get("tls-cert"), args.Get("tls-key")});
    if (!checked.ok()) return UsageError("serve", checked.status().message());
  }
  if (args.Has("tls-ca") && !args.Has("etcd")) return UsageError("serve", "--tls-ca is for --etcd (etcd's and the nodes' CA)");
  if (args.Has("tls-ca") && !https)
    return UsageError("serve", "--tls-ca needs --tls-cert and --tls-key: every node of a TLS cluster serves https");
  if (args.Has("etcd") && https && !args.Has("tls-ca"))
    return UsageError("serve", "--etcd with --tls-cert needs --tls-ca: the other nodes serve https too, and are checked against it");
  if (args.Has("etcd")) {
    if (!Database::IsSharedLocation(args.Get("db"))) return UsageError("serve", "--etcd needs a PostgreSQL --db (the nodes' shared store)");
    if (port == 0 && !args.Has("advertise")) return UsageError("serve", "--etcd needs a fixed --port (or --advertise)");
    cluster::ClusterOptions co;
    std::stringstream endpoints(args.Get("etcd"));
    for (std::string e; std::getline(endpoints, e, ',');)
      if (!e.empty()) co.etcd.push_back(e);
    co.cluster = args.Get("cluster", "moeedb");
    const std::string host = args.Get("host", "127.0.0.1");
    co.address = args.Get("advertise", host + ":" + std::to_string(port));
    co.node_id = args.Get("node-id", host + "-" + std::to_string(port));
    co.api_key = ao.api_key;
    co.lease_ttl_s = static_cast<int>(args.Int("lease-ttl"));
    co.node_left_delay_s = static_cast<int>(args.Int("node-left-delay"));
    co.index_dir = args.Get("index-dir");
    auto tls = TlsClientFromFlags(args);
    if (!tls.ok()) return UsageError("serve", tls.status().message());
    co.tls = *tls;
    auto joined = cluster::ClusterNode::Join(co);
    if (!joined.ok()) return Fail("serve", "--etcd: " + joined.status().message());
    node = std::move(joined).value();
    dbo.peers = node.get();
  }
  auto db = Database::Open(args.Get("db"), std::move(dbo));
  if (!db.ok()) return Fail("serve", db.status().message());
  auto spec = EmbeddingSpecFromFlags(args);
  if (!spec.ok()) return UsageError("serve", spec.status().message());
  EmbeddingSpec cfg = *spec;
  if (Status st = AdoptRecordedSetup(**db, args, &cfg); !st.ok()) return Fail("serve", st.message());
  ao.served_model_name = args.Get("served-model-name", std::filesystem::path(cfg.model_dir).lexically_normal().filename().string());
  if (ao.served_model_name.empty()) ao.served_model_name = "moeedb";
  auto setup = (*db)->LoadSetup(cfg);
  if (!setup.ok()) return Fail("serve", setup.status().message());
  auto stats = (*setup)->CalibrationStats();
  if (!stats.ok()) return Fail("serve", stats.status().message());

  // Block the shutdown signals before any thread starts, then wait for one.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Api api(ao, db->get(), *setup, &queues, stats->first, stats->second);
  HttpServerOptions so;
  so.host = args.Get("host", "127.0.0.1");
  so.port = static_cast<int>(port);
  so.max_body_bytes = static_cast<size_t>(body);
  so.max_connections = static_cast<size_t>(conns);
  so.idle_timeout_s = static_cast<int>(idle);
  so.request_timeout_s = static_cast<int>(request_timeout);
  so.tls_cert_file = args.Get("tls-cert");
  so.tls_key_file = args.Get("tls-key");
  const std::string scheme = https ? "https://" : "http://";
  // The Qdrant listener first, so its line comes before "listening on".
  std::unique_ptr<HttpServer> qdrant;
  if (qdrant_port >= 0) {
    HttpServerOptions qo = so;
    qo.port = static_cast<int>(qdrant_port);
    qo.path_prefix = "/qdrant";
    qdrant = std::make_unique<HttpServer>(qo, &api);
    if (Status qs = qdrant->Start(); !qs.ok()) return Fail("serve", "--qdrant-port: " + qs.message());
    std::cout << "qdrant REST API on " << scheme << qo.host << ":" << qdrant->port() << std::endl;
  }
  std::unique_ptr<HttpServer> chroma;
  if (chroma_port >= 0) {
    HttpServerOptions co = so;
    co.port = static_cast<int>(chroma_port);
    chroma = std::make_unique<HttpServer>(co, &api);
    if (Status cs = chroma->Start(); !cs.ok()) return Fail("serve", "--chroma-port: " + cs.message());
    std::cout << "chroma API on " << scheme << co.host << ":" << chroma->port() << std::endl;
  }
  HttpServer server(so, &api);
  Status st = server.Start();
  if (!st.ok()) return Fail("serve", st.message());
  std::cerr << "moeedb serve: " << (*setup)->model().config().Summary() << "\n";
  std::cout << "listening on " << scheme << so.host << ":" << server.port() << " (model id '" << ao.served_model_name
            << "')" << std::endl;
  if (node) {
    node->Attach(db->get());
    std::cout << "cluster node " << node->node_id() << " joined" << std::endl;
  }
  // Over a PostgreSQL store other nodes write too: the open collections
  // follow its change log, woken by each commit (LISTEN/NOTIFY) and read at
  // least every --follow-ms (notifications are lost across a reconnect).
  std::atomic<bool> stopping{false};
  std::thread follower;
  if ((*db)->shared()) {
    const auto period = std::chrono::milliseconds(args.Int("follow-ms"));
    follower = std::thread([&, period] {
      std::string last_error;
      while (!stopping) {
        auto n = (*db)->CatchUp();
        const std::string error = n.ok() ? "" : n.status().message();
        if (error != last_error && !error.empty()) std::cerr << "moeedb serve: following the change log: " << error << "\n";
        last_error = error;
        (*db)->WaitForChange(static_cast<int>(period.count()));
      }
    });
  }
  // Periodic snapshots of the open collections' indexes, so a kill -9
  // costs a replay of the log's tail since the last one, not of all of it.
  std::thread snapshotter;
  const auto snapshot_entries = static_cast<uint64_t>(args.Int("snapshot-entries"));
  const auto snapshot_every = std::chrono::seconds(args.Int("snapshot-s"));
  // Over a shared store it also keeps the change log to its retention window.
  const auto retention = static_cast<uint64_t>(args.Int("log-retention-entries"));
  if (snapshot_entries > 0 || snapshot_every.count() > 0 || ((*db)->shared() && retention > 0)) {
    snapshotter = std::thread([&] {
      std::string last_error;
      while (!stopping) {
        auto n = (*db)->SaveIndexesIfDue(snapshot_entries, snapshot_every);
        Status trimmed = (*db)->TrimLogs(retention);
        const std::string error = !n.ok() ? n.status().message() : trimmed.ok() ? "" : trimmed.message();
        if (error != last_error && !error.empty()) std::cerr << "moeedb serve: snapshotting indexes: " << error << "\n";
        last_error = error;
        for (int i = 0; i < 10 && !stopping; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  int sig = 0;
  sigwait(&sigs, &sig);
  std::cerr << "moeedb serve: signal " << sig << ", shutting down\n";
  stopping = true;
  if (follower.joinable()) follower.join();
  if (snapshotter.joinable()) snapshotter.join();
  // No request runs past here (one could still ask the cluster node).
  if (qdrant) qdrant->Stop();
  if (chroma) chroma->Stop();
  server.Stop();
  if (node) node->Leave();  // its claims go at once; the folder's lock is held while the snapshots are written
  Status saved = api.SaveIndexes();
  if (!saved.ok()) std::cerr << "moeedb serve: " << saved.message() << "\n";
  node.reset();
  return 0;
}

}  // namespace moeedb::cli
