#include "base/csv.h"

#include "base/file_text.h"

namespace moeedb {

Result<std::vector<std::vector<std::string>>> ReadCsv(const std::string& path) {
  MOEEDB_ASSIGN_OR_RETURN(std::string text, ReadFileText(path));
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, in_field = false;
  int64_t line = 1, row_line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (ch == '\n') ++line;
        field.push_back(ch);
      }
      continue;
    }
    if (ch == '"' && !in_field) {
      quoted = in_field = true;
    } else if (ch == ',') {
      row.push_back(std::move(field));
      field.clear();
      in_field = false;
    } else if (ch == '\n' || ch == '\r') {
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (in_field || !row.empty() || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row.clear();
      field.clear();
      in_field = false;
      row_line = ++line;
    } else {
      field.push_back(ch);
      in_field = true;
    }
  }
  if (quoted) return Status::InvalidArgument(path + ":" + std::to_string(row_line) + ": unterminated quoted field");
  if (in_field || !row.empty() || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace moeedb
