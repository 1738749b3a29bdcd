// Einsum equation parsing, shared by shape inference (core/ops/misc.cpp) and the CPU kernel.
//
// Every subscript letter and every dim covered by "..." becomes a label id: letters are 0..51
// ('a'..'z', 'A'..'Z'), ellipsis dims are 52 + k where k counts the broadcast ellipsis dims from
// the left (ellipses are right-aligned across inputs, as in numpy).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace quilt {

struct EinsumEquation {
  std::vector<std::vector<int>> inputs;  // labels of each input, one per dim (may repeat)
  std::vector<int> output;               // labels of the output (distinct)
  int num_labels = 0;                    // label ids are < num_labels
};

inline constexpr int kEinsumLetters = 52;

inline int einsum_letter_id(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// Parses `equation` for inputs of the given ranks. Returns "" on success, else what is wrong.
inline std::string parse_einsum(const std::string& equation, const std::vector<int64_t>& ranks,
                                EinsumEquation& out) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  const bool explicit_output = arrow != std::string::npos;
  if (explicit_output) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    return "equation '" + equation + "' has " + std::to_string(terms.size()) +
           " input terms but the node has " + std::to_string(ranks.size()) + " inputs";

  // Splits a term into letters before and after "...", checking characters.
  auto split = [&](const std::string& term, std::vector<int>& before, std::vector<int>& after,
                   bool& has_ellipsis) -> std::string {
    has_ellipsis = false;
    for (size_t i = 0; i < term.size();) {
      if (term.compare(i, 3, "...") == 0) {
        if (has_ellipsis) return "term '" + term + "' has more than one '...'";
        has_ellipsis = true;
        i += 3;
        continue;
      }
      const int id = einsum_letter_id(term[i]);
      if (id < 0)
        return "term '" + term + "' has character '" + term[i] + "', expected letters or '...'";
      (has_ellipsis ? after : before).push_back(id);
      ++i;
    }
    return "";
  };

  int64_t ellipsis_rank = 0;
  std::vector<std::vector<int>> befores(terms.size()), afters(terms.size());
  std::vector<int64_t> term_ellipsis(terms.size(), -1);
  for (size_t t = 0; t < terms.size(); ++t) {
    bool has_ellipsis = false;
    std::string err = split(terms[t], befores[t], afters[t], has_ellipsis);
    if (!err.empty()) return err;
    const int64_t letters = static_cast<int64_t>(befores[t].size() + afters[t].size());
    if (has_ellipsis) {
      if (ranks[t] < letters)
        return "term '" + terms[t] + "' needs rank >= " + std::to_string(letters) + " but input " +
               std::to_string(t) + " has rank " + std::to_string(ranks[t]);
      term_ellipsis[t] = ranks[t] - letters;
      ellipsis_rank = std::max(ellipsis_rank, term_ellipsis[t]);
    } else if (ranks[t] != letters) {
      return "term '" + terms[t] + "' has " + std::to_string(letters) + " subscripts but input " +
             std::to_string(t) + " has rank " + std::to_string(ranks[t]);
    }
  }
  out = EinsumEquation{};
  out.num_labels = kEinsumLetters + static_cast<int>(ellipsis_rank);
  std::vector<int> uses(static_cast<size_t>(kEinsumLetters), 0);
  for (size_t t = 0; t < terms.size(); ++t) {
    std::vector<int> labels = befores[t];
    for (int64_t k = ellipsis_rank - std::max<int64_t>(term_ellipsis[t], 0); k < ellipsis_rank; ++k)
      if (term_ellipsis[t] >= 0) labels.push_back(kEinsumLetters + static_cast<int>(k));
    labels.insert(labels.end(), afters[t].begin(), afters[t].end());
    for (int l : befores[t]) ++uses[static_cast<size_t>(l)];
    for (int l : afters[t]) ++uses[static_cast<size_t>(l)];
    out.inputs.push_back(std::move(labels));
  }

  if (explicit_output) {
    std::vector<int> before, after;
    bool has_ellipsis = false;
    std::string err = split(rhs, before, after, has_ellipsis);
    if (!err.empty()) return err;
    out.output = before;
    if (has_ellipsis)
      for (int64_t k = 0; k < ellipsis_rank; ++k)
        out.output.push_back(kEinsumLetters + static_cast<int>(k));
    out.output.insert(out.output.end(), after.begin(), after.end());
    std::vector<int> seen(static_cast<size_t>(out.num_labels), 0);
    for (int l : out.output) {
      if (l < kEinsumLetters && uses[static_cast<size_t>(l)] == 0)
        return "output subscript '" + rhs + "' uses a letter that no input has";
      if (seen[static_cast<size_t>(l)]++) return "output subscript '" + rhs + "' repeats a letter";
    }
  } else {
    // Implicit output: the ellipsis dims, then letters used exactly once, in alphabetical order.
    for (int64_t k = 0; k < ellipsis_rank; ++k)
      out.output.push_back(kEinsumLetters + static_cast<int>(k));
    std::vector<std::pair<char, int>> once;
    for (int l = 0; l < kEinsumLetters; ++l)
      if (uses[static_cast<size_t>(l)] == 1)
        once.push_back({static_cast<char>(l < 26 ? 'a' + l : 'A' + (l - 26)), l});
    std::sort(once.begin(), once.end());  // ASCII order, as numpy
    for (const auto& [_, l] : once) out.output.push_back(l);
  }
  return "";
}

// The size of every label given the input shapes (-1 = unknown). A label whose inputs disagree
// broadcasts when the others are 1; returns "" or what is wrong. sizes[l] is 1 for labels no
// input has.
inline std::string einsum_label_sizes(const EinsumEquation& eq,
                                      const std::vector<std::vector<int64_t>>& shapes,
                                      std::vector<int64_t>& sizes) {
  sizes.assign(static_cast<size_t>(eq.num_labels), 1);
  std::vector<char> unknown(static_cast<size_t>(eq.num_labels), 0);
  for (size_t t = 0; t < eq.inputs.size(); ++t) {
    for (size_t d = 0; d < eq.inputs[t].size(); ++d) {
      const auto l = static_cast<size_t>(eq.inputs[t][d]);
      const int64_t s = shapes[t][d];
      if (s < 0) {
        unknown[l] = 1;
      } else if (s != 1) {
        if (sizes[l] != 1 && sizes[l] != s)
          return "dims of the same subscript differ: " + std::to_string(sizes[l]) + " and " +
                 std::to_string(s) + " (input " + std::to_string(t) + ", dim " + std::to_string(d) +
                 ")";
        sizes[l] = s;
      }
    }
  }
  for (size_t l = 0; l < sizes.size(); ++l)
    if (unknown[l] && sizes[l] == 1) sizes[l] = -1;
  return "";
}

}  // namespace quilt
