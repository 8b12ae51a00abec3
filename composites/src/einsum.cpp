// einsum as a sequence of pairwise contractions, each one batched matrix product (bmm) over
// [batch, free, contracted] views, plus sums for labels that only one operand has. Operands are
// contracted left to right (the `path` argument is accepted and ignored).
#include "composite.h"

#include <algorithm>
#include <map>

namespace tessera::composites {
namespace {

// A label is a letter (its char code) or an ellipsis dimension (kEllipsis + its index from the right).
constexpr int kEllipsis = 1000;
using Labels = std::vector<int>;

struct Operand {
  TensorRef t;
  Labels labels;  // one per dim of t
};

bool is_label_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The labels of one operand's subscripts, with its ellipsis expanded to `ndim`'s extra dims.
Labels parse_subscripts(std::string_view s, int64_t ndim, size_t index, int64_t* ellipsis_dims) {
  Labels before, after;
  bool ellipsis = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.substr(i, 3) == "...") {
      if (ellipsis) fail(TS_ERROR_VALUE, "einsum(): found more than one ellipsis (\"...\") in the subscripts of operand ", index);
      ellipsis = true;
      i += 2;
    } else if (is_label_char(s[i])) {
      (ellipsis ? after : before).push_back(int(s[i]));
    } else {
      fail(TS_ERROR_VALUE, "einsum(): invalid subscript given at index ", i, " in the equation string, subscripts must be in [a-zA-Z]");
    }
  }
  int64_t named = int64_t(before.size() + after.size());
  if (!ellipsis && named != ndim)
    fail(TS_ERROR_VALUE, "einsum(): the number of subscripts in the equation (", named,
         ") does not match the number of dimensions (", ndim, ") for operand ", index, " and no ellipsis was given");
  if (ellipsis && named > ndim)
    fail(TS_ERROR_VALUE, "einsum(): the number of subscripts in the equation (", named,
         ") is more than the number of dimensions (", ndim, ") for operand ", index);
  int64_t extra = ndim - named;
  *ellipsis_dims = ellipsis ? extra : -1;
  Labels out = before;
  for (int64_t k = extra - 1; k >= 0; --k) out.push_back(kEllipsis + int(k));
  out.insert(out.end(), after.begin(), after.end());
  return out;
}

// Removes a repeated label of one operand (a diagonal): x * eye over the pair, summed over the second.
void take_diagonals(Operand& op) {
  for (size_t i = 0; i < op.labels.size(); ++i)
    for (size_t j = i + 1; j < op.labels.size(); ++j) {
      if (op.labels[i] != op.labels[j]) continue;
      int64_t n = op.t.size(int64_t(i));
      if (op.t.size(int64_t(j)) != n)
        fail(TS_ERROR_VALUE, "einsum(): subscript ", char(op.labels[i]), " is repeated for operand but the sizes don't match, ",
             n, " != ", op.t.size(int64_t(j)));
      IntList eye_shape(op.labels.size(), 1);
      eye_shape[i] = eye_shape[j] = n;
      TensorRef eye = ops::reshape(ops::eye(n, std::nullopt, op.t.dtype(), op.t.device()), eye_shape);
      op.t = ops::sum(ops::mul(op.t, eye), IntList{int64_t(j)}, false);
      op.labels.erase(op.labels.begin() + long(j));
      --j;
    }
}

// Sums the dims whose labels are not in `keep`.
void sum_unneeded(Operand& op, const std::vector<int>& keep) {
  IntList dims;
  Labels kept;
  for (size_t i = 0; i < op.labels.size(); ++i) {
    if (std::find(keep.begin(), keep.end(), op.labels[i]) == keep.end()) dims.push_back(int64_t(i));
    else kept.push_back(op.labels[i]);
  }
  if (dims.empty()) return;
  op.t = ops::sum(op.t, dims, false);
  op.labels = kept;
}

int64_t label_size(const Operand& op, int label) {
  auto it = std::find(op.labels.begin(), op.labels.end(), label);
  return it == op.labels.end() ? 1 : op.t.size(int64_t(it - op.labels.begin()));
}

// op's tensor permuted to `order` (labels), expanded to `sizes`, as a [groups...] 3-d view; when
// the tensor is laid out as [g0, g2, g1] already, it is viewed that way and transposed instead
// of copied (so bmm reads it with transposed strides).
TensorRef as_matrix_batch(const Operand& op, const Labels& g0, const Labels& g1, const Labels& g2,
                          const std::map<int, int64_t>& sizes) {
  auto positions = [&](const Labels& ls) {
    IntList p;
    for (int l : ls) p.push_back(int64_t(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin()));
    return p;
  };
  auto product = [&](const Labels& ls) {
    int64_t n = 1;
    for (int l : ls) n *= sizes.at(l);
    return n;
  };
  IntList p0 = positions(g0), p1 = positions(g1), p2 = positions(g2);
  bool needs_expand = false;
  for (size_t i = 0; i < op.labels.size(); ++i) needs_expand |= op.t.size(int64_t(i)) != sizes.at(op.labels[i]);
  auto arranged = [&](const IntList& a, const IntList& b, const IntList& c) {
    IntList perm = a;
    perm.insert(perm.end(), b.begin(), b.end());
    perm.insert(perm.end(), c.begin(), c.end());
    return perm;
  };
  auto is_identity = [](const IntList& perm) {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != int64_t(i)) return false;
    return true;
  };
  IntList direct = arranged(p0, p1, p2), swapped = arranged(p0, p2, p1);
  if (!needs_expand && !is_identity(direct) && is_identity(swapped) && op.t.is_contiguous())
    return ops::transpose(ops::reshape(op.t, {product(g0), product(g2), product(g1)}), 1, 2);
  TensorRef t = ops::permute(op.t, direct);
  if (needs_expand) {
    IntList full;
    for (int64_t p : direct) full.push_back(sizes.at(op.labels[size_t(p)]));
    t = ops::expand(t, full);
  }
  return ops::reshape(t, {product(g0), product(g1), product(g2)});
}

Operand contract(const Operand& a, const Operand& b, const std::vector<int>& keep) {
  auto has = [](const Labels& ls, int l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); };
  Labels batch, contracted, a_only, b_only;
  std::map<int, int64_t> sizes;
  for (int l : a.labels) {
    int64_t sa = label_size(a, l), sb = has(b.labels, l) ? label_size(b, l) : sa;
    if (sa != sb && sa != 1 && sb != 1)
      fail(TS_ERROR_VALUE, "einsum(): operands do not broadcast with remapped shapes (original->remapped): size ", sa,
           " and size ", sb, " for the same subscript");
    sizes[l] = std::max(sa, sb);
    if (!has(b.labels, l)) a_only.push_back(l);
    else if (has(keep, l)) batch.push_back(l);
    else contracted.push_back(l);
  }
  for (int l : b.labels) {
    if (!sizes.count(l)) sizes[l] = label_size(b, l);
    if (!has(a.labels, l)) b_only.push_back(l);
  }
  TensorRef lhs = as_matrix_batch(a, batch, a_only, contracted, sizes);
  TensorRef rhs = as_matrix_batch(b, batch, contracted, b_only, sizes);
  TensorRef product = ops::bmm(lhs, rhs);
  Operand out;
  IntList shape;
  for (const Labels* group : {&batch, &a_only, &b_only})
    for (int l : *group) {
      out.labels.push_back(l);
      shape.push_back(sizes[l]);
    }
  out.t = ops::reshape(product, shape);
  return out;
}

void einsum(Args& a) {
  std::string eq;
  const std::string_view equation = *a.optional_str(0);
  for (char c : equation)
    if (c != ' ') eq += c;
  std::vector<TensorRef> tensors = a.tensor_list(1);
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != tensors.size())
    fail(TS_ERROR_VALUE, "einsum(): ", terms.size() < tensors.size() ? "more" : "fewer",
         " operands were provided than specified in the equation");
  std::vector<Operand> operands;
  int64_t max_ellipsis = 0;
  std::map<int, int> counts;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t ell = -1;
    Operand op{tensors[i], parse_subscripts(terms[i], tensors[i].dim(), i, &ell)};
    max_ellipsis = std::max(max_ellipsis, ell);
    for (int l : op.labels) counts[l] += 1;  // before diagonals: "ii" counts i twice (summed, implicit form)
    take_diagonals(op);
    operands.push_back(std::move(op));
  }
  // Output labels: as written after "->", or (implicit form) the ellipsis, then every letter used once, sorted.
  Labels output;
  if (arrow != std::string::npos) {
    std::string rhs = eq.substr(arrow + 2);
    int64_t dummy = 0;
    Labels parsed;
    bool rhs_ellipsis = rhs.find("...") != std::string::npos;
    for (char c : rhs)
      if (is_label_char(c) && std::count(rhs.begin(), rhs.end(), c) > 1)
        fail(TS_ERROR_VALUE, "einsum(): output subscript ", c, " appears more than once in the output");
    int64_t letters = std::count_if(rhs.begin(), rhs.end(), is_label_char);
    parsed = parse_subscripts(rhs, letters + (rhs_ellipsis ? max_ellipsis : 0), 0, &dummy);
    for (int l : parsed)
      if (l < kEllipsis && !counts.count(l))
        fail(TS_ERROR_VALUE, "einsum(): output subscript ", char(l), " does not appear in the equation for any input operand");
    output = parsed;
  } else {
    for (int64_t k = max_ellipsis - 1; k >= 0; --k) output.push_back(kEllipsis + int(k));
    for (auto& [l, n] : counts)
      if (l < kEllipsis && n == 1) output.push_back(l);
  }
  // Contract left to right; a label is kept while the output or a later operand needs it.
  auto needed_after = [&](size_t i) {
    std::vector<int> keep(output.begin(), output.end());
    for (size_t j = i; j < operands.size(); ++j) keep.insert(keep.end(), operands[j].labels.begin(), operands[j].labels.end());
    return keep;
  };
  Operand acc = operands[0];
  sum_unneeded(acc, needed_after(1));
  for (size_t i = 1; i < operands.size(); ++i) {
    Operand next = operands[i];
    std::vector<int> keep = needed_after(i + 1);
    std::vector<int> keep_next = keep;
    keep_next.insert(keep_next.end(), acc.labels.begin(), acc.labels.end());
    sum_unneeded(next, keep_next);
    acc = contract(acc, next, keep);
  }
  sum_unneeded(acc, output);
  IntList perm;
  for (int l : output) {
    auto it = std::find(acc.labels.begin(), acc.labels.end(), l);
    if (it == acc.labels.end()) fail(TS_ERROR_VALUE, "einsum(): output subscript does not appear in the inputs");
    perm.push_back(int64_t(it - acc.labels.begin()));
  }
  TensorRef result = ops::permute(acc.t, perm);
  a.return_tensor(std::move(result));
}

}  // namespace

void register_einsum(sdk::Registrar& reg) { composite(reg, "einsum", einsum); }

}  // namespace tessera::composites
