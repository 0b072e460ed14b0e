// Helpers shared by the CLI subcommands.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/prompt.h"
#include "base/png_plot.h"
#include "base/status.h"
#include "base/tls.h"
#include "engine/tokenizer/tokenizer.h"
#include "plugin/cli/args.h"
#include "plugin/cli/spec_flags.h"
#include "database/embedding_setup.h"

namespace moeedb::cli {

// The tokenizer named by --tokenizer FILE, else MODEL_DIR/tokenizer.json.
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& tokenizer_flag, const std::string& model_dir);

// Reads stdin as lines (a final line without '\n' counts; '\r\n' is accepted).
std::vector<std::string> ReadLines(std::istream& in);

// --prompt NAME into *prompt (left as is when the flag is absent); an unknown
// name is an error listing the known ones.
Status ReadPromptFlag(const Args& args, PromptTemplate* prompt);

// The embedding setup named by --model, --routing, --prompt, --hs-pooling,
// --rw-pooling, --dtype, --quant and --device (the spec's defaults for
// absent flags; the embedded default model without --model), with the
// default SSMoE cache folder. Threads and batch sizes are the caller's.
// InvalidArgument naming the option for a value the spec's table refuses.
Result<EmbeddingSpec> EmbeddingSpecFromFlags(const Args& args);

// The flags of these EmbeddingSpec fields (EmbeddingFields()).
std::vector<FlagSpec> EmbeddingFlags(const std::vector<std::string>& fields);
// The EmbeddingSpec fields among the flags into *cfg (its values kept for
// absent flags); InvalidArgument naming the option.
Status ReadEmbeddingFlags(const Args& args, EmbeddingSpec* cfg);
// The weight-format flags alone into *cfg (a database's compute options).
Status ReadWeightFormatFlags(const Args& args, EmbeddingSpec* cfg);

// The embedded default model's folder: $MOEEDB_MODEL if set, else the first
// of <exe>/../models/moeedb-tiny (a build tree), <exe>/models/moeedb-tiny and
// <exe>/../share/moeedb/models/moeedb-tiny (an install prefix) that holds a
// config.json; "" when none does.
std::string DefaultModelDir();

// --tls-ca with --tls-cert and --tls-key if given: the TLS client context for
// etcd and the other nodes; null without --tls-ca.
Result<std::shared_ptr<const TlsContext>> TlsClientFromFlags(const Args& args);
// --model if given, else DefaultModelDir().
std::string ModelDirFlag(const Args& args);

// $MOEEDB_CACHE_DIR, else $XDG_CACHE_HOME/moeedb, else ~/.cache/moeedb, else "" (no cache).
std::string DefaultCacheDir();

// A fresh folder under $TMPDIR (or /tmp), removed with its contents when the
// handle goes (e.g. the scratch database of an evaluation); null when none
// could be made.
struct RemoveDir {
  void operator()(const std::string* path) const;
};
using TempDir = std::unique_ptr<const std::string, RemoveDir>;
TempDir MakeTempDir();

// A training log, {"history": [{"step": S, KEY: VALUE, ...}, ...]}, read from
// `path`; Corruption naming the file when it is not one.
Result<nlohmann::json> ReadTrainingLog(const std::string& path);
// `series` with the (step, value) of every history entry holding `key` appended.
PlotSeries WithHistory(PlotSeries series, const nlohmann::json& log, const std::string& key);

// Shortest round-trip text for a float (std::to_chars).
void AppendFloat(std::string* out, float v);

}  // namespace moeedb::cli
