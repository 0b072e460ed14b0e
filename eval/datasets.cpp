#include "eval/datasets.h"

#include "base/file_text.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace moeedb::eval {

namespace fs = std::filesystem;

namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

Result<std::vector<StsPair>> LoadSts(const std::string& path) {
  MOEEDB_ASSIGN_OR_RETURN(auto rows, ReadCsv(path));
  std::vector<StsPair> out;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != 3)
      return Status::InvalidArgument(path + ": record " + std::to_string(r + 1) + " has " +
                                     std::to_string(rows[r].size()) + " fields, expected sentence1,sentence2,score");
    StsPair p{rows[r][0], rows[r][1], 0};
    try {
      size_t used = 0;
      p.score = std::stod(rows[r][2], &used);
      if (used != rows[r][2].size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return Status::InvalidArgument(path + ": record " + std::to_string(r + 1) + ": score '" + rows[r][2] +
                                     "' is not a number");
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) return Status::InvalidArgument(path + " holds no pairs");
  return out;
}

Result<std::vector<LabeledText>> LoadLabeled(const std::string& path) {
  MOEEDB_ASSIGN_OR_RETURN(auto rows, ReadCsv(path));
  if (rows.empty() || rows[0].size() != 2 || rows[0][0] != "text")
    return Status::InvalidArgument(path + ": expected a header 'text,category'");
  std::vector<LabeledText> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() != 2)
      return Status::InvalidArgument(path + ": record " + std::to_string(r + 1) + " has " +
                                     std::to_string(rows[r].size()) + " fields, expected text,category");
    out.push_back({rows[r][0], rows[r][1]});
  }
  if (out.empty()) return Status::InvalidArgument(path + " holds no rows");
  return out;
}

namespace {

// SMART records: ".I n" starts a record; ".X" lines start fields.
struct SmartRecord {
  std::string id;
  std::map<char, std::string> fields;
};

Result<std::vector<SmartRecord>> ReadSmart(const std::string& path) {
  MOEEDB_ASSIGN_OR_RETURN(std::string text, ReadFileText(path));
  std::vector<SmartRecord> out;
  std::istringstream in(text);
  std::string line;
  char field = 0;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(".I", 0) == 0) {
      out.push_back({Trim(line.substr(2)), {}});
      field = 0;
    } else if (line.size() >= 2 && line[0] == '.' && std::isalpha(static_cast<unsigned char>(line[1])) &&
               Trim(line.substr(2)).empty()) {
      if (out.empty()) return Status::InvalidArgument(path + ":" + std::to_string(n) + ": field before any .I record");
      field = line[1];
    } else if (field != 0) {
      std::string& f = out.back().fields[field];
      if (!f.empty()) f.push_back(' ');
      f += Trim(line);
    }
  }
  return out;
}

}  // namespace

Result<RetrievalSet> LoadCranfield(const std::string& dir) {
  RetrievalSet set;
  MOEEDB_ASSIGN_OR_RETURN(auto docs, ReadSmart((fs::path(dir) / "cran.all.1400").string()));
  for (auto& d : docs) {
    std::string title = Trim(d.fields['T']), body = Trim(d.fields['W']);
    // The abstract (W) of many records starts by repeating the title.
    std::string text = body.rfind(title, 0) == 0 ? body : title + " " + body;
    if (Trim(text).empty()) text = title.empty() ? "(empty)" : title;
    set.doc_ids.push_back(d.id);
    set.doc_texts.push_back(text);
  }
  MOEEDB_ASSIGN_OR_RETURN(auto queries, ReadSmart((fs::path(dir) / "cran.qry").string()));
  for (auto& q : queries) set.queries.push_back(Trim(q.fields['W']));
  set.qrels.resize(set.queries.size());
  std::ifstream f(fs::path(dir) / "cranqrel");
  if (!f) return Status::NotFound("cannot read " + (fs::path(dir) / "cranqrel").string());
  int64_t qid = 0, rel = 0;
  std::string did;
  while (f >> qid >> did >> rel) {
    if (qid < 1 || qid > static_cast<int64_t>(set.queries.size()))
      return Status::InvalidArgument("cranqrel: query " + std::to_string(qid) + " out of range");
    if (rel >= 1 && rel <= 4) set.qrels[qid - 1][did] = 5 - static_cast<int>(rel);
  }
  if (set.doc_ids.empty() || set.queries.empty()) return Status::InvalidArgument(dir + ": no documents or queries");
  return set;
}

}  // namespace moeedb::eval
