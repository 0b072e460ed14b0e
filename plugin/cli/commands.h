// The CLI's commands: the table (command_table.cpp) and the functions its rows
// run (cmd_*.cpp). Each function takes the parsed flags of its row and returns
// the process exit code: 0 success, 1 error (message on stderr), 2 usage.
#pragma once

#include <vector>

#include "plugin/cli/command.h"  // Command, Args, Fail, UsageError
#include "plugin/cli/spec_flags.h"

namespace moeedb::cli {

// Every command, in the order `moeedb --help` lists them.
std::vector<Command> CommandTable();

// Flags more than one row takes.
inline const FlagSpec kDbFlag{"db", "DIR", "database folder (created on first ingest) or a PostgreSQL URI (postgresql://...)"};
inline const FlagSpec kIndexDirFlag{"index-dir", "DIR",
                                    "local folder of the derived indexes (needed with a PostgreSQL --db; default: the --db folder)"};
inline const FlagSpec kCollFlag{"collection", "NAME", "collection name"};
// The cluster commands' etcd and cluster name.
inline const FlagSpec kEtcdFlag{"etcd", "HOSTS", "etcd client endpoints, host:port[,host:port...]"};
inline const FlagSpec kClusterNameFlag{"cluster", "NAME", "the cluster's name (default moeedb)"};
// TLS: the CA that signs etcd's and the nodes' certificates (set: they are asked over https), and
// this process's own certificate and key (presented to etcd with --client-cert-auth; serve's HTTPS).
inline const FlagSpec kTlsCaFlag{"tls-ca", "FILE", "PEM CA certificates etcd's and the other nodes' certificates must chain to: "
                                                   "with it they are asked over https"};
inline const FlagSpec kTlsCertFlag{"tls-cert", "FILE", "PEM certificate chain presented to clients and to etcd"};
inline const FlagSpec kTlsKeyFlag{"tls-key", "FILE", "PEM private key of --tls-cert"};
// ingest embeds texts: the client-vector settings belong to the server's APIs.
inline const FieldPick kIngestFields{.skip = {"vector_size", "distance", "text_key"}};
// The evaluation commands' model or baseline, dataset and limit.
std::vector<FlagSpec> EvalFlags();

int RunTokenize(const Args& args);          // cmd_tokenize.cpp
int RunEmbed(const Args& args);             // cmd_embed.cpp
int RunModelInit(const Args& args);         // cmd_model.cpp
int RunModelInfo(const Args& args);
int RunModelCalibrate(const Args& args);
int RunModelPrune(const Args& args);        // cmd_experts.cpp
int RunLensSpecialise(const Args& args);
int RunIngest(const Args& args);            // cmd_collections.cpp
int RunSearch(const Args& args);
int RunGet(const Args& args);
int RunDelete(const Args& args);
int RunCollectionsList(const Args& args);
int RunCollectionsInfo(const Args& args);
int RunCollectionsDrop(const Args& args);
int RunCollectionsIndex(const Args& args);
int RunScroll(const Args& args);
int RunFacet(const Args& args);
int RunCheckpoint(const Args& args);
int RunClusterStatus(const Args& args);      // cmd_cluster.cpp
int RunClusterDrain(const Args& args);
int RunClusterReshard(const Args& args);
int RunServe(const Args& args);             // cmd_serve.cpp
int RunAlpha(const Args& args);             // cmd_routing.cpp
int RunLens(const Args& args);
int RunTrainTokenizer(const Args& args);    // cmd_train.cpp
int RunTrainModel(const Args& args);
int RunTrainEmbed(const Args& args);        // cmd_train_embed.cpp
int RunEvalSts(const Args& args);           // cmd_eval.cpp
int RunEvalRetrieval(const Args& args);
int RunEvalClassify(const Args& args);
int RunEvalTexts(const Args& args);

}  // namespace moeedb::cli
