#include "engine/model/prompt.h"

namespace moeedb {

const std::vector<PromptTemplate>& PromptTemplates() {
  static const std::vector<PromptTemplate> kTemplates = {
      {"prompteol", "This sentence : \"*sent 0*\" means in one word:\""},
      {"none", "\"*sent 0*\""},
      {"style", "In one word, describe the style of the following sentence - \"*sent 0*\" :\""},
      {"sentiment",
       "In one word, describe the sentiment of the following sentence (positive, neutral, or negative) - \"*sent 0*\" :"},
      {"tone",
       "In one word, describe the tone of the following sentence - \"*sent 0*\" (e.g., formal, informal, humorous, "
       "serious):"},
      {"intent",
       "In one word, describe the intent behind the following sentence (e.g., request, suggestion, command) - \"*sent "
       "0*\" :"},
      {"complexity",
       "In one word, rate the complexity of the following sentence (simple, moderate, complex) - \"*sent 0*\" :"},
      {"subjectivity", "In one word, describe whether the following sentence is subjective or objective - \"*sent 0*\" :"},
      {"language_style",
       "In one word, describe the language style of the following sentence (e.g., academic, conversational, literary) - "
       "\"*sent 0*\" :"},
      {"grammar_structure",
       "In one word, describe the grammatical structure of the following sentence (simple, compound, complex) - \"*sent "
       "0*\" :"},
      {"raw", ""},
  };
  return kTemplates;
}

Result<PromptTemplate> FindPrompt(const std::string& name) {
  for (const auto& t : PromptTemplates())
    if (t.name == name) return t;
  return Status::InvalidArgument("unknown prompt '" + name + "'; known prompts: " + PromptNames());
}

std::string PromptNames() {
  std::string s;
  for (const auto& t : PromptTemplates()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

namespace {

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

// Python's str.isspace() for the ASCII range (what str.strip() removes there).
bool IsPySpace(unsigned char ch) { return ch == ' ' || (ch >= 0x09 && ch <= 0x0d) || (ch >= 0x1c && ch <= 0x1f); }

}  // namespace

std::string GritLmInstruction(std::string_view instruction) {
  return "<|user|>\n" + std::string(instruction) + "\n<|embed|>\n";
}

std::string ApplyPrompt(const PromptTemplate& tmpl, std::string_view text, std::string_view instruction) {
  if (tmpl.name == "raw") return std::string(text);
  std::string s = std::string(instruction) + std::string(text);
  // ' '.join(s.split(' ')) is the identity; then the sentence-final period.
  // s[-1] is a code point in Python; a UTF-8 final byte is ASCII iff the code point is.
  if (!s.empty() && std::string_view(".?!\"'").find(s.back()) == std::string_view::npos) s.push_back('.');
  ReplaceAll(s, "\"", "'");
  std::string p = tmpl.text;
  ReplaceAll(p, "*sent 0*", s);
  for (char& ch : p)
    if (ch == '_') ch = ' ';
  size_t b = 0, e = p.size();
  while (b < e && IsPySpace(static_cast<unsigned char>(p[b]))) ++b;
  while (e > b && IsPySpace(static_cast<unsigned char>(p[e - 1]))) --e;
  return p.substr(b, e - b);
}

}  // namespace moeedb
