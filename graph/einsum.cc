#include "graph/einsum.h"

#include <algorithm>
#include <cctype>

namespace fusor {
namespace {

int LetterLabel(char c) {
  return std::isupper(static_cast<unsigned char>(c)) ? c - 'A' : 26 + c - 'a';
}

// One term's letters and where its ellipsis is (-1: none): "b...ij" is {b, i, j}, 1.
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

StatusOr<Term> ParseTerm(const std::string& term, const std::string& equation) {
  Term t;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0 && t.ellipsis_at < 0) {
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      t.letters.push_back(LetterLabel(term[i]));
    } else {
      return Status::InvalidArgument("Einsum equation '" + equation + "': '" + term[i] +
                                     "' is not a letter, ',' , '->' or '...'");
    }
  }
  return t;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

// Gives `label` the length `dim`, broadcasting a 1 for ellipsis labels.
Status Bind(int label, int64_t dim, const std::string& equation, EinsumSpec* spec) {
  int64_t& have = spec->label_dims[label];
  if (have == 0 || have == dim) {
    have = dim;
  } else if (label >= kEllipsisLabel && (have == 1 || dim == 1)) {
    have = std::max(have, dim);
  } else {
    return Status::InvalidArgument("Einsum equation '" + equation + "': a label has lengths " +
                                   std::to_string(have) + " and " + std::to_string(dim));
  }
  return Status::Ok();
}

}  // namespace

Shape EinsumSpec::output_dims() const {
  Shape dims;
  for (int label : output) dims.push_back(label_dims[label]);
  return dims;
}

StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, const std::vector<Shape>& operands) {
  std::string eq;
  for (char c : equation) {
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  }
  const size_t arrow = eq.find("->");
  const std::vector<std::string> terms = Split(eq.substr(0, arrow), ',');
  if (terms.size() != operands.size()) {
    return Status::InvalidArgument("Einsum equation '" + equation + "' has " +
                                   std::to_string(terms.size()) + " terms for " +
                                   std::to_string(operands.size()) + " operands");
  }
  size_t ellipsis_rank = 0;
  std::vector<Term> parsed;
  for (size_t k = 0; k < terms.size(); ++k) {
    FUSOR_ASSIGN_OR_RETURN(Term t, ParseTerm(terms[k], equation));
    const size_t rank = operands[k].size();
    if (t.letters.size() > rank || (t.ellipsis_at < 0 && t.letters.size() != rank)) {
      return Status::InvalidArgument("Einsum equation '" + equation + "': term '" + terms[k] +
                                     "' does not fit operand " + std::to_string(k) + " of rank " +
                                     std::to_string(rank));
    }
    if (t.ellipsis_at >= 0) ellipsis_rank = std::max(ellipsis_rank, rank - t.letters.size());
    parsed.push_back(std::move(t));
  }
  EinsumSpec spec;
  spec.label_dims.assign(kEllipsisLabel + ellipsis_rank, 0);
  std::vector<int> uses(spec.label_dims.size(), 0);
  for (size_t k = 0; k < parsed.size(); ++k) {
    const Term& t = parsed[k];
    const size_t covered = operands[k].size() - t.letters.size();
    std::vector<int> labels(t.letters.begin(), t.letters.end());
    if (t.ellipsis_at >= 0) {
      std::vector<int> ellipsis;
      for (size_t j = 0; j < covered; ++j) {
        ellipsis.push_back(kEllipsisLabel + static_cast<int>(ellipsis_rank - covered + j));
      }
      labels.insert(labels.begin() + t.ellipsis_at, ellipsis.begin(), ellipsis.end());
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      FUSOR_RETURN_IF_ERROR(Bind(labels[d], operands[k][d], equation, &spec));
      ++uses[labels[d]];
    }
    spec.operands.push_back(std::move(labels));
  }
  std::vector<int> ellipsis;
  for (size_t j = 0; j < ellipsis_rank; ++j)
    ellipsis.push_back(kEllipsisLabel + static_cast<int>(j));
  if (arrow == std::string::npos) {
    spec.output = ellipsis;
    for (int label = 0; label < kEllipsisLabel; ++label) {
      if (uses[label] == 1) spec.output.push_back(label);
    }
    return spec;
  }
  FUSOR_ASSIGN_OR_RETURN(Term out, ParseTerm(eq.substr(arrow + 2), equation));
  for (int label : out.letters) {
    if (uses[label] == 0) {
      return Status::InvalidArgument("Einsum equation '" + equation +
                                     "': an output label is on no operand");
    }
  }
  spec.output = out.letters;  // Without an ellipsis in the output, its dims are summed over.
  if (out.ellipsis_at >= 0) {
    spec.output.insert(spec.output.begin() + out.ellipsis_at, ellipsis.begin(), ellipsis.end());
  }
  return spec;
}

}  // namespace fusor
