// Prompt templates exactly as the MoEE reference code builds them
// (method.md A.2): clean the text, then put it in the template.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace moeedb {

struct PromptTemplate {
  std::string name;
  std::string text;  // contains "*sent 0*" where the sentence goes
};

// prompteol (the default), none, and the eight other templates of Table 2.
const std::vector<PromptTemplate>& PromptTemplates();
Result<PromptTemplate> FindPrompt(const std::string& name);
std::string PromptNames();  // "prompteol, none, ..."

// What the reference computes for `text` under `tmpl`, with an optional
// instruction prefix (the GritLM form, "<|user|>\n...\n<|embed|>\n", lands
// inside the quotes as in the reference; empty = no instruction):
//   s = instruction + text; if s doesn't end in . ? ! " ' append '.';
//   s = s.replace('"', "'"); prompt = tmpl.replace("*sent 0*", s)
//   .replace('_', ' ').strip().
// The template "raw" returns the text unchanged (no cleaning).
std::string ApplyPrompt(const PromptTemplate& tmpl, std::string_view text, std::string_view instruction = "");

// "<|user|>\n" + instruction + "\n<|embed|>\n"
std::string GritLmInstruction(std::string_view instruction);

}  // namespace moeedb
